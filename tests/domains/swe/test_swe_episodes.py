"""Scripted agents drive SWE episodes through ``ToolEnv``: a generator injects a known bug with bash, the episode's
diff is valid; a solver reverts it with write_file, and the repair solves the bug."""

from __future__ import annotations

import json

from propel.domains.swe.tool_episodes import episode_diff, generator_context, solver_context, suite_command
from propel.domains.swe.validity import BugValidator
from propel.envs.tool_env import ToolEnv


def _call(name, **arguments):
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def _episode(env, context, sandbox, actions):
    obs = env.reset(context, sandbox)
    assert obs.messages and not obs.done
    seen = []
    for action in actions:
        obs = env.step(action)
        seen.append(obs)
    assert obs.done and env.state.finish_reason == "submitted"
    return seen, env.state.files


def test_scripted_generator_and_solver_episodes(swe_repo, sandbox):
    profile, root, manifest = swe_repo("parse")
    validator = BugValidator(profile, root, sandbox, manifest=manifest)
    env = ToolEnv(max_turns=6, command_timeout_s=60.0, time_limit_s=300.0)

    gen = generator_context(profile, root)
    assert suite_command(profile) in gen.prompt.messages[0]["content"] and gen.group == "parse"
    inject = "sed -i 's/return self.converter(string)$/return self.converter(string[::-1])/' parse.py"
    actions = [_call("bash", command=suite_command(profile)), _call("bash", command=inject), _call("submit")]
    seen, files = _episode(env, gen, sandbox, actions)
    assert "passed" in seen[0].content  # the prompt's test command runs the suite in the workspace
    diff = episode_diff(gen, files)
    assert "+        return self.converter(string[::-1])" in diff
    bug = validator.check(diff)
    assert bug.valid and bug.changed == ("parse.py",) and bug.failing

    fix = solver_context(profile, root, bug.files, bug.failing)
    assert bug.failing[0] in fix.prompt.messages[0]["content"]
    clean = (root / "parse.py").read_text()
    _, fixed = _episode(env, fix, sandbox, [_call("write_file", path="parse.py", content=clean), _call("submit")])
    repair = episode_diff(fix, fixed)
    assert "-        return self.converter(string[::-1])" in repair
    assert validator.grade_repair(bug, repair).solved
    assert not validator.grade_repair(bug, episode_diff(fix, {})).solved  # an idle solver solves nothing


def test_a_truncated_collection_is_an_infrastructure_error_never_a_diff(sandbox, tokenizer):
    """ToolEnv cuts collected files at max_collect_chars (100,000 by default) and tabulate's module is 108 kB: an
    episode that leaves it untouched must not yield a diff deleting its tail (a repair graded as a broken suite, a
    generator scored on a bug it never wrote). The episode is an infrastructure failure, and the domain refuses to
    make a diff, a bug or a grade of such a collection."""
    import pytest

    from propel.domains.swe.checkout import checkout
    from propel.domains.swe.domain import SweDomain
    from propel.domains.swe.repos import get_repo
    from propel.records import Task

    profile = get_repo("tabulate")
    root = checkout(profile)
    gen = generator_context(profile, root)
    env = ToolEnv(max_turns=2, command_timeout_s=60.0, time_limit_s=300.0)
    env.reset(gen, sandbox)
    obs = env.step(_call("submit"))
    assert obs.done and obs.finish_reason == "error"
    assert "tabulate/__init__.py" in env.state.infra_error and "max_collect_chars" in env.state.infra_error

    from propel.engines.engine import SamplingSpec
    from propel.engines.scripted import ScriptedEngine
    from propel.rollouts.episode_runner import EpisodeRunner

    runner = EpisodeRunner(ScriptedEngine(tokenizer, lambda p: _call("submit")), ToolEnv, sandbox)
    ((sample,),), _ = runner.run([gen], SamplingSpec(n=1, max_new_tokens=64))
    assert "max_collect_chars" in sample.infra_error and not sample.valid  # left out of the group statistics

    from propel.domains.swe.tool_episodes import TruncatedCollection

    module = (root / "tabulate/__init__.py").read_text()
    cut = {
        "files": {"tabulate/__init__.py": module[:100_000]},
        "verifier": {"collect_truncated": ["tabulate/__init__.py"]},
    }
    domain = SweDomain(repos=["tabulate"])
    with pytest.raises(TruncatedCollection, match="tabulate/__init__.py"):
        domain.episode_completion(gen, cut)
    task = Task(domain="swe", data={"repo": "tabulate", "diff": "", "failing": ["test_x"]})
    with pytest.raises(TruncatedCollection, match="tabulate/__init__.py"):
        domain.agent_grade(task, [cut], None)
