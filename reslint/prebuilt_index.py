"""The project-wide scan of import words, made once for a pool's workers by a helper process.

The first class a worker analyses that asks where the project builds it (`ProjectIndex.construction_sites_of`)
makes the worker read every Python file of the project for the words of its import statements: 0.2-0.3 CPU-s
for transformers' 2,951 files, which every worker of a parallel check paid at the same time. A helper forked
just before the parent imports the engines (a serial start that leaves the other cores idle) makes that scan
once; the workers, forked afterwards, adopt it from an unnamed temporary file they inherit, once the helper
has ended (the pipe whose only writer it holds closes then, also when it crashed or was killed).

A worker adopts only what the helper built for the same run (`ProjectIndex.new_run`): the same files, read in
the same check. Without a result (the helper failed, another run, another project root) the index scans the
project itself, as without a helper. Only with the `fork` start method: the workers must inherit the descriptors
and this module's state.
"""

from __future__ import annotations

import os
import pickle
import tempfile
from collections import Counter
from pathlib import Path

from reslint.project_index import ProjectIndex, project_root

MAX_PREBUILT_ROOTS = 4  # the projects of a run's files scanned by the helper: a run is mostly one project


class PrebuiltScan:
    """A helper building the scans of `roots`; what `adopt` gives the indexes of those roots in this run."""

    def __init__(self, roots: list[Path]):
        self.roots = roots
        self.run = ProjectIndex.current_run()
        self.helper: int | None = None
        self._built: dict[Path, tuple] | None = None
        self._parent = os.getpid()
        self._result = tempfile.TemporaryFile()
        try:
            self._ended, written = os.pipe()
        except OSError:
            self._result.close()
            raise
        try:
            self.helper = os.fork()
        except OSError:
            os.close(written)
            self.close()
            raise
        if self.helper == 0:
            status = 1
            try:
                os.close(self._ended)
                status = self._build_in_helper()
            finally:
                os._exit(status)  # never back into the parent's code, whatever happened
        os.close(written)  # the helper holds the only writer: its end closes the pipe

    def _build_in_helper(self) -> int:
        import signal

        from reslint.isolation import end_with_parent

        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it kills this helper
        end_with_parent(signal.SIGKILL)  # a parent killed outright wants no scan any more
        if os.getppid() != self._parent:
            return 1
        ProjectIndex.prebuilt = None  # this process builds the scan: it never waits for one
        try:
            built = {root: ProjectIndex(root).shareable_scan() for root in self.roots}
            data = memoryview(pickle.dumps(built, protocol=pickle.HIGHEST_PROTOCOL))
            descriptor, written = self._result.fileno(), 0
            while written < len(data):
                written += os.pwrite(descriptor, data[written:], written)
            return 0
        except BaseException:  # noqa: BLE001 - without a result each worker scans the project itself
            return 1

    def adopt(self, index: ProjectIndex) -> None:
        """Give `index` the helper's scan of its project, if the helper made one for this run."""
        if ProjectIndex.current_run() != self.run or index.root not in self.roots:
            return
        built = self._read().get(index.root)
        if built is not None:
            index.adopt_scan(*built)

    def _read(self) -> dict[Path, tuple]:
        if self._built is None:
            self._built = {}
            try:
                while os.read(self._ended, 1):  # returns b"" once the helper has ended
                    pass
                size = os.fstat(self._result.fileno()).st_size
                if size:
                    self._built = pickle.loads(os.pread(self._result.fileno(), size, 0))
            except Exception:  # noqa: BLE001 - an unreadable result is no result
                self._built = {}
        return self._built

    def close(self) -> None:
        """In the process that started the helper, after the run: end it if it still runs, and free what it used."""
        if ProjectIndex.prebuilt is self:
            ProjectIndex.prebuilt = None
        if self.helper:
            import signal

            try:
                os.kill(self.helper, signal.SIGKILL)  # harmless when it has ended: it is a zombie until reaped
                os.waitpid(self.helper, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
            self.helper = None
        for closing in (lambda: os.close(self._ended), self._result.close):
            try:
                closing()
            except OSError:
                pass


def start_prebuilt_scan(paths: list[str]) -> PrebuiltScan | None:
    """Start the helper for the projects of `paths` (the most common first), and hand it to the indexes of this
    process and of the processes it forks from now on; None when it cannot start."""
    roots = [root for root, _ in Counter(project_root(path) for path in paths).most_common(MAX_PREBUILT_ROOTS)]
    try:
        scan = PrebuiltScan(roots)
    except OSError:
        return None
    ProjectIndex.prebuilt = scan
    return scan
