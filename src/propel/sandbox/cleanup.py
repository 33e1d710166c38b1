"""Remove the sandbox containers that dead processes left behind: ``python -m propel.sandbox.cleanup``.

A trainer killed with SIGKILL (or by the OOM killer) runs no finalizer, so its worker and session containers live
on. Every new ``DockerSandbox`` reaps them already; this command does the same without starting one (before a
long run, or from cron). Only containers labelled by propel on this host whose owning process is gone are removed.
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m propel.sandbox.cleanup", description=__doc__.split("\n")[0])
    parser.parse_args(argv)
    import docker
    from docker.errors import DockerException

    from propel.sandbox.docker_containers import reap_stale_containers

    try:
        removed = reap_stale_containers(docker.from_env())
    except DockerException as e:
        print(f"no Docker engine answers ({e}); nothing to clean up", file=sys.stderr)
        return 1
    print(f"removed {removed} sandbox container(s) left behind by dead processes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
