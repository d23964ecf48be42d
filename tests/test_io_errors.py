"""I/O refusals by the machine (a file-size limit, a full disk) are the user's to fix: one ``error:`` line
naming the path and the cause, exit 2, no partial artifact (issue 33 item 3)."""

from __future__ import annotations

import errno
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from shepherd.core.errors import UserError, environment_error

ROOT = Path(__file__).resolve().parents[1]


def _limited(args: list[str], cwd: Path, fsize_bytes: int) -> subprocess.CompletedProcess:
    """``shepherd ARGS`` in a subprocess whose files may not grow past ``fsize_bytes`` (RLIMIT_FSIZE: a
    write past it fails with EFBIG, as a full disk fails with ENOSPC; Python ignores SIGXFSZ)."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize_bytes, fsize_bytes))

    code = "import sys; from shepherd.cli.app import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True,
                          preexec_fn=limit, timeout=300)


@pytest.mark.parametrize("args, written", [
    (["traces", "generate", "--rate", "20000", "--duration-s", "5", "-o", "t.parquet"], "t.parquet"),
    (["profile", "--table", "shepherd-v100", "-o", "p.parquet"], "p.parquet"),
])
def test_a_file_size_limit_is_one_error_line_and_exit_2(tmp_path, args, written):
    r = _limited(args, tmp_path, 2048)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2, r.stderr
    assert len(lines) == 1 and lines[0].startswith("error: cannot write") and "EFBIG" in lines[0], r.stderr
    assert not (tmp_path / written).exists()
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]  # no partial temp left behind


def test_the_same_command_without_the_limit_succeeds(tmp_path):
    """The cases above fail for the limit alone (not for a bad argument)."""
    r = _limited(["profile", "--table", "shepherd-v100", "-o", "p.parquet"], tmp_path, resource.RLIM_INFINITY)
    assert r.returncode == 0, r.stderr and (tmp_path / "p.parquet").is_file()


@pytest.mark.parametrize("name", ["ENOSPC", "EFBIG", "EROFS", "EACCES", "EDQUOT"])
def test_each_refusal_maps_to_a_user_error_naming_path_and_cause(name):
    code = getattr(errno, name)
    err = environment_error(OSError(code, os.strerror(code), "/x/out.parquet"))
    assert isinstance(err, UserError) and "/x/out.parquet" in str(err) and name in str(err)


def test_a_wrapped_refusal_is_found_in_the_chain_and_by_its_text():
    """pyarrow raises an OSError with no errno but ``[errno 28]`` in its text; polars may wrap it."""
    try:
        try:
            raise OSError("error writing to x.parquet: [errno 28] No space left on device")
        except OSError as inner:
            raise RuntimeError("write failed") from inner
    except RuntimeError as outer:
        err = environment_error(outer)
    assert err is not None and "ENOSPC" in str(err)


def test_other_errors_stay_internal():
    assert environment_error(ValueError("bug")) is None
    assert environment_error(OSError(errno.ENOENT, "No such file", "x")) is None


def test_a_sweep_that_cannot_write_its_cell_stops_in_one_line_and_resumes(tmp_path):
    """The grid runner's writes go through the same handler: no half-written cell or results table; the same
    command without the limit then runs the cell (the folder is a resumable run, not a partial artifact)."""
    (tmp_path / "s.toml").write_text('name = "s"\npolicies = ["flex"]\n[trace]\nname = "maf-synthetic"\n'
                                     'duration_min = 1\nsynthetic_rate = 40.0\nfunctions = 10\n[cluster]\ngpus = 2\n')
    args = ["sweep", "s.toml", "-o", "out", "-j", "1"]
    r = _limited(args, tmp_path, 2048)
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("error")]
    assert r.returncode == 2, r.stderr
    assert len(lines) == 1 and "EFBIG" in lines[0] and "cells" in lines[0], r.stderr
    assert not list((tmp_path / "out").rglob("*.parquet"))
    r = _limited(args, tmp_path, resource.RLIM_INFINITY)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out" / "results.parquet").is_file()
