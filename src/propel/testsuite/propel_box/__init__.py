"""Code that runs *inside* a sandbox job, shipped as the job's ``propel_box/`` package (standard library only).

The trainer never imports these modules: ``propel.testsuite.shipping`` reads their text and sends them with each
grading job. They are the trusted half of grading in the sandbox: the runner processes that hold the tests, and the
set-up a graded child applies to itself before any model-written code runs (``confine``: Landlock and rlimits;
``audit``: the audit hook; ``graded_start``: both in the order every graded child applies them; ``channel``: the
authenticated result channel; ``integrity``: the runner's code snapshot). ``wait`` is the one wall-clock wait every
runner uses, ``output`` the one tail of a graded process's output it reports.
"""
