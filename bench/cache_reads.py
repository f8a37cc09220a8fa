#!/usr/bin/env python
"""Which files a check read that its cache entry does not depend on: candidates for a stale cached result.

For each Python file of PROJECT (a directory with its own reslint.toml), one `reslint check FILE` runs in a
fresh process (no memo of an earlier file hides a read), with every read through `file_gate.read_project_file`
logged, the trace children's too. The file's cache entry then names what it depends on: its `reads`, and, when
the trace engine imported it, the project files it imports. Each file read but in neither is printed with the
call stack that read it.

Expect noise: the construction-site search and the config-field scan read the import lines of many files to
find the few that matter (`imported_words`, `_bindings`, `config_defaults`: a file they pass over is not a
dependency until it gains a site), and the project stage analyses the files a checked training script links
to in the same process (their reads are listed against the checked file).

    .venv/bin/python bench/cache_reads.py PROJECT [--static] [FILE ...]
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

LOGGED = "RESLINT_READS_LOG"
SEARCH = ("project_index.py:imported_words", "cache.py:", "analysis.py:analyse_source", "config.py:")


def logged_check(arguments: list[str]) -> int:
    import reslint.file_gate as gate

    read = gate.read_project_file

    def logging_read(path, root, limit):
        stack = [f"{os.path.basename(frame.filename)}:{frame.name}" for frame in traceback.extract_stack()[:-1]
                 if f"{os.sep}reslint{os.sep}" in frame.filename]
        with open(os.environ[LOGGED], "a", encoding="utf-8") as log:
            log.write(json.dumps([os.path.abspath(path), stack]) + "\n")
        return read(path, root, limit)

    gate.read_project_file = logging_read  # before the engines import it by name
    from reslint import cli

    return cli.run(arguments)


def dependencies(project: Path, display: str) -> set[str] | None:
    from reslint.project_index import ProjectIndex

    for entry in glob.glob(str(project / ".reslint_cache" / "files" / "*" / "*.json")):
        body = json.loads(json.loads(Path(entry).read_text())["payload"])
        if body["result"]["path"] != display:
            continue
        found = set((body.get("reads") or {}).get("paths", []))
        if body["imports"] is not None:
            found |= {str(path) for path in ProjectIndex.for_file(project / display, project).dependencies(project / display)}
        return found
    return None


def audit(project: Path, static: bool, files: list[str]) -> None:
    log = Path(tempfile.mkdtemp()) / "reads.jsonl"
    for display in files:
        shutil.rmtree(project / ".reslint_cache", ignore_errors=True)
        log.write_text("")
        command = [sys.executable, __file__, "--logged", "check", "--jobs", "1", "--exit-zero", "--config", "reslint.toml",
                   *(["--static"] if static else []), "--output-format", "json", display]
        done = subprocess.run(command, cwd=project, env={**os.environ, LOGGED: str(log)}, capture_output=True, text=True)
        depends = dependencies(project, display) if done.returncode == 0 else None
        if depends is None:
            print(f"{display}: no result ({done.stderr.strip()[-300:]})")
            continue
        missing: dict[str, list[str]] = {}
        for line in log.read_text().splitlines():
            path, stack = json.loads(line)
            if path == str(project / display) or ".reslint_cache" in path or any(
                    frame.startswith(SEARCH) for frame in stack):
                continue
            if path not in depends:
                missing.setdefault(path, stack)
        print(f"{display}: {len(depends)} dependencies, {len(missing)} other files read")
        for path, stack in missing.items():
            print(f"    {os.path.relpath(path, project)} <- {' > '.join(stack[-8:])}")


def main() -> None:
    if sys.argv[1:2] == ["--logged"]:
        sys.exit(logged_check(sys.argv[2:]))
    arguments = [argument for argument in sys.argv[1:] if argument != "--static"]
    if not arguments or arguments[0] in ("-h", "--help"):
        print(__doc__)
        return
    project = Path(arguments[0]).resolve()
    files = arguments[1:] or sorted(str(path.relative_to(project)) for path in project.rglob("*.py")
                                    if ".reslint_cache" not in path.parts)
    audit(project, "--static" in sys.argv, files)


if __name__ == "__main__":
    main()
