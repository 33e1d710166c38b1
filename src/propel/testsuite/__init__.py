"""Grading model-written code with pristine pytest suites in a sandbox, and detecting reward hacks.

``SuiteRunner`` runs the suites (JUnit XML parsed in the trainer);
``detectors`` flags what a solution did to the tests or to pytest instead of solving the task.
"""

from propel.testsuite.junit import ReportError, parse_junit
from propel.testsuite.runner import Submission, SuiteRun, SuiteRunner, pristine_ini

__all__ = ["ReportError", "Submission", "SuiteRun", "SuiteRunner", "parse_junit", "pristine_ini"]
