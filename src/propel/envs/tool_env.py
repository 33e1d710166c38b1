"""A sandboxed tool environment: ``bash``, ``read_file``, ``write_file`` and ``submit`` in a per-episode workspace.

The task is a ``Context`` whose ``data`` holds the workspace's starting ``files``, its check as data
(``expect_files`` and/or ``value_tests``: ``propel.envs.verdict``) and ``collect``, the workspace files handed back
when the episode ends (for a grader outside the environment: labeling's agent solver trials), and optionally
``collect_whole``: the task needs those files whole (SWE rebuilds a diff from them), so a collection cut at
``max_collect_chars`` ends the episode as an infrastructure failure instead of handing back cut text. When the
episode ends, whatever ended it, the files are collected and the verdict is computed from them outside the episode's
session (a file compared here, the tests run by value grading): nothing the agent left running or rewrote in its
workspace reaches it, and no exit status of a process that ran the agent's code decides it. Every command runs in the
episode's ``Session`` of the trainer's sandbox (a container per episode with Docker, a bubblewrapped host folder
locally) under a per-command timeout; long output is cut with a marker; a turn and a wall-time budget bound the
episode. Whatever the model writes -- a malformed call, an unknown tool, a hostile command -- comes back as an
observation; only a sandbox that cannot run at all ends the episode as an infrastructure failure
(``finish_reason="error"``)."""

from __future__ import annotations

import time
import uuid
from dataclasses import replace

from propel.engines.tool_calls import CLOSE, ToolCall, ToolCallError, check_arguments, function_tool, parse_tool_call
from propel.envs.agent_env import AgentEnv, EpisodeState, Observation
from propel.envs.verdict import check_task, needed_files, verdict
from propel.errors import ConfigError
from propel.records import Context
from propel.sandbox.job import Job, Limits, Outcome, Result, SandboxError, check_file_name
from propel.sandbox.sandbox import Sandbox

TOOLS = [
    function_tool("bash", "Run a shell command in the workspace (the current directory).", command="the command"),
    function_tool("read_file", "Read a file of the workspace.", path="relative path"),
    function_tool("write_file", "Create or overwrite a file of the workspace.", path="relative path", content="text"),
    function_tool("submit", "Finish: the task is done (it is then checked)."),
]
MAX_COLLECT_FILES = 200
"""Most files one episode hands back (``collect`` globs could match a whole tree)."""
SYSTEM_PROMPT = (
    "You are an agent in a Linux workspace. Solve the task by calling tools, one call per message, then call "
    'submit. Example:\n<tool_call>{"name": "bash", "arguments": {"command": "echo hello > greeting.txt"}}</tool_call>'
)


def _in_workspace(path: str) -> bool:
    """Whether ``path`` names a file inside the workspace (the sandbox's own file-name rule)."""
    try:
        check_file_name(path)
    except (TypeError, ValueError):
        return False
    return True


class ToolEnv(AgentEnv):
    """One episode of tool use in a sandbox session; the task's verdict on the files it left gives the reward (1 or
    0).

    Args:
        max_turns: actions before the episode ends (``max_turns``), verified as it stands.
        time_limit_s: time the episode's commands may take in all before it ends (``time_limit``); generation is
            not counted (with many episodes sharing one engine, waiting for it says nothing about the episode).
        command_timeout_s: per-command limit (``bash``, ``read_file``); the command is killed past it.
        max_output_chars: observation text kept per command; the rest is replaced by a marker saying how much.
        verify_timeout_s: limit of the verdict's test run (``value_tests``).
        max_collect_chars: text kept of each collected file (longer files are cut; the cut is recorded, and is an
            infrastructure failure for a task whose ``data["collect_whole"]`` is set).
        malformed_call_reward: per-turn reward of an action that is not a valid tool call (e.g. -0.1 teaches a
            small model the call format; 0 gives none). Summed by ``propel.rewards.TurnRewards``.
        limits: the session's other limits (memory, processes, file size); the sandbox's defaults when None.
        system_prompt: the system message (tool descriptions are added by the rollout when the chat template
            does not render ``tools``).
    """

    tools = TOOLS
    stop = (CLOSE,)

    def __init__(
        self,
        max_turns: int = 8,
        time_limit_s: float = 120.0,
        command_timeout_s: float = 10.0,
        max_output_chars: int = 2000,
        verify_timeout_s: float = 30.0,
        max_collect_chars: int = 100_000,
        malformed_call_reward: float = 0.0,
        limits: Limits | None = None,
        system_prompt: str = SYSTEM_PROMPT,
    ) -> None:
        positive = ("max_turns", "time_limit_s", "command_timeout_s", "max_output_chars", "verify_timeout_s")
        for name in (*positive, "max_collect_chars"):
            if locals()[name] <= 0:
                raise ConfigError(f"ToolEnv {name} must be > 0, got {locals()[name]}")
        self.max_turns, self.time_limit_s, self.command_timeout_s = max_turns, time_limit_s, command_timeout_s
        self.max_output_chars, self.verify_timeout_s = max_output_chars, verify_timeout_s
        self.max_collect_chars, self.malformed_call_reward = max_collect_chars, malformed_call_reward
        self.limits, self.system_prompt = limits, system_prompt
        self._state = EpisodeState()
        self._session = None
        self._sandbox: Sandbox | None = None
        self._context: Context | None = None
        self._spent = 0.0

    @property
    def state(self) -> EpisodeState:
        return self._state

    # ----------------------------------------------------------------------------------------------- episode
    def reset(self, context: Context, sandbox: Sandbox | None = None) -> Observation:
        if sandbox is None:
            raise ConfigError("ToolEnv runs commands: reset() needs the trainer's sandbox")
        if context.prompt.messages is None:
            raise ConfigError(f"ToolEnv tasks need chat messages as their prompt (context {context.id!r})")
        check_task(context.data, context.id)
        self.close()
        self._context, self._spent, self._sandbox = context, 0.0, sandbox
        self._state = EpisodeState(episode_id=f"{context.id}-{uuid.uuid4().hex[:8]}")
        messages = [{"role": "system", "content": self.system_prompt}, *context.prompt.messages]
        try:
            self._session = sandbox.session(self._limits(self.command_timeout_s))
            files = dict(context.data.get("files", {}))
            if files:
                self._run(Job(command=["true"], files=files), "setup")
        except SandboxError as e:
            return self._fail(f"sandbox: {e}", messages)
        return Observation(role="user", messages=messages)

    def step(self, action: str) -> Observation:
        if self._state.done:
            raise RuntimeError("step() after the episode ended: call reset() first")
        self._state.step_count += 1
        start = time.monotonic()
        call = parse_tool_call(action)
        if isinstance(call, ToolCall):
            problem = check_arguments(call, self.tools)
            call = ToolCallError(problem) if problem else call
        try:
            if isinstance(call, ToolCallError):
                obs = Observation(f"error: {call.reason}", metadata={"tool": None, "error": call.reason})
                obs.turn_reward = self.malformed_call_reward or None
            elif call.name == "submit":
                return self._finish("submitted", {"tool": "submit", "arguments": {}})
            else:
                obs = self._tool(call)
        except SandboxError as e:
            return self._fail(f"sandbox: {e}")
        obs.metadata["duration_s"] = time.monotonic() - start
        self._spent += obs.metadata["duration_s"]
        try:
            if self._state.step_count >= self.max_turns:
                return replace(self._finish("max_turns", obs.metadata, obs.content), turn_reward=obs.turn_reward)
            if self._spent > self.time_limit_s:
                return replace(self._finish("time_limit", obs.metadata, obs.content), turn_reward=obs.turn_reward)
        except SandboxError as e:
            return self._fail(f"sandbox: {e}")
        return obs

    def end(self, finish_reason: str) -> Observation:
        if self._state.done:
            raise RuntimeError("end() after the episode ended")
        try:
            return self._finish(finish_reason, {})
        except SandboxError as e:
            return self._fail(f"sandbox: {e}")

    def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            session.close()

    # ------------------------------------------------------------------------------------------------- tools
    def _tool(self, call: ToolCall) -> Observation:
        meta = {"tool": call.name, "arguments": call.arguments}
        args = call.arguments
        if call.name == "bash":
            result = self._run(Job(command=["bash", "-c", args["command"]]), call.name)
            return self._observe(result, meta, show_exit=True)
        if call.name == "read_file":
            result = self._run(Job(command=["cat", "--", args["path"]]), call.name)
            return self._observe(result, meta, show_exit=False)
        if call.name == "write_file":
            if not _in_workspace(args["path"]):
                return Observation(
                    f"error: path {args['path']!r} must be relative and inside the workspace",
                    metadata={**meta, "error": "bad_path"},
                )
            result = self._run(Job(command=["true"], files={args["path"]: args["content"]}), call.name)
            text = f"wrote {len(args['content'])} characters to {args['path']}" if result.ok else result.stderr
            return Observation(text, metadata={**meta, "exit_code": result.exit_code})
        raise AssertionError(f"tool {call.name!r} has no handler")  # check_arguments admits only TOOLS

    def _observe(self, result: Result, meta: dict, show_exit: bool) -> Observation:
        meta = {**meta, "exit_code": result.exit_code, "outcome": result.outcome.value}
        text = result.stdout + (("\n" if result.stdout and result.stderr else "") + result.stderr)
        if result.outcome is Outcome.TIMEOUT:
            text += f"\n[killed: the command ran past {self.command_timeout_s:g} s]"
        elif result.outcome is Outcome.OUTPUT_LIMIT:
            text += "\n[killed: the command wrote more output than the sandbox allows]"
        text, cut = self._truncate(text)
        meta["truncated"] = cut or result.truncated
        head = f"[exit code {result.exit_code}]\n" if show_exit else ""
        if not show_exit and not result.ok and result.outcome is Outcome.ERROR:
            meta["error"] = "read_failed"
        return Observation(head + text, metadata=meta)

    def _truncate(self, text: str) -> tuple[str, bool]:
        if len(text) <= self.max_output_chars:
            return text, False
        more = len(text) - self.max_output_chars
        return text[: self.max_output_chars] + f"\n[... output truncated: {more} more characters]", True

    def _limits(self, timeout_s: float) -> Limits:
        base = self.limits or Limits()
        return replace(base, timeout_s=timeout_s, cpu_s=None)

    def _run(self, job: Job, what: str) -> Result:
        job.limits = job.limits or self._limits(self.command_timeout_s)
        result = self._session.run(job)
        if what == "setup" and not result.ok:
            raise SandboxError(f"could not write the task's files ({result.outcome.value}): {result.stderr[-300:]}")
        return result

    # ---------------------------------------------------------------------------------------------- endings
    def _finish(self, reason: str, meta: dict, content: str = "") -> Observation:
        """Collect the task's files, end the session, decide the verdict from the files and end the episode."""
        data = self._context.data if self._context else {}
        patterns = list(dict.fromkeys([*data.get("collect", []), *needed_files(data)]))
        self._state.files, cut = self._collect(patterns)
        if cut and data.get("collect_whole"):  # cut text is not the workspace: nothing may be graded or diffed on it
            self._state.verifier = {"passed": False, "collect_truncated": cut}
            shown = ", ".join(cut[:3]) + (f" and {len(cut) - 3} more" if len(cut) > 3 else "")
            return self._fail(
                f"collected files cut at max_collect_chars={self.max_collect_chars} ({shown}) but the task needs them "
                "whole: raise ToolEnv max_collect_chars"
            )
        self.close()  # the agent's processes end here: the verdict is computed after, from the files it left
        result = verdict(data, self._state.files, cut, self._sandbox, self.verify_timeout_s)
        if cut:
            result["collect_truncated"] = cut
        reward = 1.0 if result["passed"] else 0.0
        self._state.done, self._state.finish_reason, self._state.verifier = True, reason, result
        return Observation(
            content, done=True, reward=reward, reward_components={"passed": reward}, finish_reason=reason, metadata=meta
        )

    def _collect(self, patterns: list[str]) -> tuple[dict[str, str | None], list[str]]:
        """The files the task asks for (path -> text, None when missing, unreadable or not a workspace path) and
        what was cut: plain paths as given, glob patterns (``*``, ``?``, ``[``; ``**`` spans folders) expanded to
        the workspace's regular files, at most ``MAX_COLLECT_FILES`` files of at most ``max_collect_chars`` each."""
        plain = [p for p in patterns if not any(c in p for c in "*?[")]
        globs = [p for p in patterns if p not in plain]
        found: list[str] = []
        if globs:
            script = (  # IFS empty: a pattern is globbed, never split on spaces
                'shopt -s globstar nullglob dotglob; IFS=; for p in "$@"; do for f in $p; do '
                '[ -f "$f" ] && printf "%s\\0" "$f"; done; done'
            )
            result = self._run(Job(command=["bash", "-c", script, "collect", *globs]), "collect")
            found = [f for f in result.stdout.split("\0") if f]
        paths = list(dict.fromkeys([*plain, *found]))
        cut = []
        if len(paths) > MAX_COLLECT_FILES:
            cut.append(f"{len(paths) - MAX_COLLECT_FILES} files past the first {MAX_COLLECT_FILES}")
        files: dict[str, str | None] = {}
        for path in paths[:MAX_COLLECT_FILES]:
            text = self._read_for_collect(path)
            files[path] = None if text is None else text[: self.max_collect_chars]
            if text is not None and len(text) > self.max_collect_chars:
                cut.append(path)
        return files, cut

    def _read_for_collect(self, path: str) -> str | None:
        """A workspace file's text, up to a little past ``max_collect_chars`` (so a cut shows), or None."""
        if not _in_workspace(path):
            return None
        cap = 4 * self.max_collect_chars  # bytes enough for max_collect_chars characters of UTF-8
        limits = replace(self._limits(self.command_timeout_s), max_output_bytes=cap + 4096)
        result = self._run(Job(command=["head", "-c", str(cap), "--", path], limits=limits), "collect")
        return result.stdout if result.ok else None

    def _fail(self, error: str, messages: list[dict[str, str]] | None = None) -> Observation:
        self._state.done, self._state.finish_reason, self._state.infra_error = True, "error", error
        self.close()
        return Observation(done=True, reward=0.0, finish_reason="error", metadata={"error": error}, messages=messages)
