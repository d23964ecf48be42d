"""Symphony model zoos: the built-in tables equal the paper's Tables 1, 5 and 6 row for row."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from shepherd.core import profiles as prof
from shepherd.core.artifacts import read_artifact

from conftest import SHARED

SEED = SHARED / "seeds" / "003_ee5d5a3bd3e01970.txt"  # the Symphony paper as plain text, in the team's shared folder
needs_seed = pytest.mark.skipif(not SEED.exists(), reason="needs the Symphony paper as plain text at "
                                "$SHEPHERD_SHARED/seeds/003_ee5d5a3bd3e01970.txt (set SHEPHERD_SHARED); "
                                "the spot checks below run without it")

# Independent transcription of rows the tests pin even without the seed text.
SPOT = {
    "symphony-1080ti": [("NASNetMobile", "0.570", "14.348", "25.172", "33"), ("ResNet50", "2.050", "5.378", "2.623", "27"),
                        ("InceptionResNetV2", "5.090", "18.368", "3.609", "77"), ("BERT", "7.008", "0.159", "0.023", "56")],
    "symphony-a100": [("DenseNet121", "0.054", "10.546", "195.296", "21"), ("InceptionResNetV2", "1.112", "15.27", "13.732", "39"),
                      ("EfficientNetB7", "16.339", "2.751", "0.168", "136"), ("BERT", "7.353", "0.222", "0.030", "59")],
}
TABLE1 = [("DenseNet121", "1.06", "10.31", "9.71", "32", "99", "2172"),
          ("EfficientNet", "1.56", "5.58", "3.55", "21", "88", "1519"),
          ("InceptionV3", "1.96", "8.77", "4.46", "92", "230", "3386"),
          ("MobileNet", "1.01", "2.39", "2.36", "17", "84", "2653"),
          ("ResNet50", "2.05", "5.37", "2.62", "98", "170", "2798"),
          ("VGG16", "2.73", "5.78", "2.11", "528", "822", "6200")]


def _csv_rows(name: str, cols: list[str]) -> list[tuple[str, ...]]:
    """The CSV's cells as printed strings (read as text: '0.570' keeps its trailing zero)."""
    raw = pl.read_csv(Path(prof.__file__).parent / "profile_tables" / prof.BUILTIN_TABLES[name].file,
                      infer_schema=False)
    return [tuple(r) for r in raw.select(cols).iter_rows()]


def _paper_block(caption: str, ncols: int) -> list[tuple[str, ...]]:
    """Rows of the tab-separated table whose caption line starts with ``caption`` (rows precede it)."""
    lines = SEED.read_text(encoding="utf-8").splitlines()
    end = next(i for i, ln in enumerate(lines) if ln.startswith(caption))
    rows: list[tuple[str, ...]] = []
    i = end - 1
    while i >= 0 and (not lines[i].strip() or "\t" in lines[i]):
        cells = lines[i].split("\t")
        if len(cells) == ncols and cells[0] not in ("Name", "Model"):
            rows.append(tuple(c.strip() for c in cells))
        elif cells[0] in ("Name", "Model"):
            break
        i -= 1
    return rows[::-1]


LINEAR_COLS = ["model", "alpha_ms", "beta_ms", "beta_over_alpha", "slo_ms"]


@pytest.mark.parametrize("name, count", [("symphony-1080ti", 35), ("symphony-a100", 37)])
def test_tables_5_and_6_spot_rows_and_counts(name, count):
    rows = _csv_rows(name, LINEAR_COLS)
    assert len(rows) == count
    for spot in SPOT[name]:
        assert spot in rows
    betas = [float(r[3]) for r in rows]
    assert betas == sorted(betas, reverse=True)  # the paper's order: descending β/α


def test_table_1_rows():
    assert _csv_rows("symphony-memory", ["model", "alpha_ms", "beta_ms", "beta_over_alpha", "file_mb", "static_mb",
                                         "dynamic_mb"]) == TABLE1


@needs_seed
@pytest.mark.parametrize("name, caption", [("symphony-1080ti", "Table 5:"), ("symphony-a100", "Table 6:")])
def test_tables_5_and_6_equal_the_paper_row_for_row(name, caption):
    paper = [(n, a, b, r, slo.removesuffix("ms")) for n, a, b, r, slo in _paper_block(caption, 5)]
    assert len(paper) >= 35
    assert _csv_rows(name, LINEAR_COLS) == paper


@needs_seed
def test_table_1_equals_the_paper_row_for_row():
    assert _paper_block("Table 1:", 7) == TABLE1


@pytest.mark.parametrize("name, hardware", [("symphony-1080ti", "1080Ti"), ("symphony-a100", "A100")])
def test_profile_cli_builds_each_zoo(cli, tmp_path, name, hardware):
    out = tmp_path / "p.parquet"
    r = cli("profile", "--table", name, "-o", out)
    assert r.code == 0, r.err
    frame = read_artifact(out, "profiles").frame
    assert set(frame["hardware"]) == {hardware}
    raw = prof.read_builtin_raw(name)
    one = frame.filter(pl.col("batch") == 4).sort("model")
    want = raw.sort("model")
    assert one["model"].to_list() == want["model"].to_list()
    assert (one["latency_ms"] - (4 * want["alpha_ms"] + want["beta_ms"])).abs().max() < 1e-9
    assert one["slo_ms"].to_list() == want["slo_ms"].to_list()
