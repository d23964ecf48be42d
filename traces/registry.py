"""Named traces: ``--trace maf2019 | maf2019-stable | maf2019-bursty | maf2021 | maf-synthetic …``.

One registry by name (STYLE.md rule 1): each entry says what it is and how to
build a trace frame from :class:`TraceOptions`. :func:`shepherd.traces.resolve.load_trace`
looks names up here, so ``plan``, ``simulate`` and ``traces`` all resolve the
same names the same way.

Defaults (documented choices; Shepherd §7 unless noted):

* day 1, from the first minute present (minute 1 for a full day file), for
  ``duration_min`` = 5 minutes — the full day would be billions of requests;
* every function with at least one invocation in the window is a stream
  (``streams`` keeps the N busiest, ``sample`` a uniform random N);
* streams map to models round-robin over Shepherd Table 4's 17 models
  (``shepherd-v100`` order), or by ``model_map``: a CSV with columns
  ``HashFunction,model`` (functions it does not list stay round-robin);
  SLO 250 ms for every stream;
* native load (``load`` = None); ``load`` X rescales to X requests/s (see
  :mod:`shepherd.traces.expand`; MAF 2021: :mod:`shepherd.traces.maf2021`);
* ``maf2019`` is ``maf2019-stable`` (Poisson within each minute);
  ``*-bursty`` uses the per-minute MMPP with ``mmpp_*`` shape parameters;
* ``maf-synthetic``: 1000 functions at 3000 req/s over the day (see
  :mod:`shepherd.traces.maf_synthetic`); labelled synthetic everywhere.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Callable

import numpy as np
import polars as pl

from shepherd.core import profiles as prof
from shepherd.core.errors import UserError
from shepherd.core.units import ms_to_us
from shepherd.traces import checks, expand, fetch, maf2019, maf2021, maf_synthetic

DEFAULT_MODEL_TABLE = "shepherd-v100"
PROCESSES = ("stable", "bursty")


@dataclass(frozen=True)
class TraceOptions:
    """Every option a named trace accepts (all keyword, all defaulted)."""

    day: int | None = None  # None: day 1, or the one day a single file holds
    start_minute: int | None = None
    duration_min: int = 5
    streams: int | None = None
    sample: int | None = None
    load: float | None = None
    slo_ms: float = 250.0
    models: tuple[str, ...] | None = None
    process: str | None = None
    mmpp_ratio: float = expand.DEFAULT_BURSTY.ratio
    mmpp_dwell_low: float = expand.DEFAULT_BURSTY.dwell_low_s
    mmpp_dwell_high: float = expand.DEFAULT_BURSTY.dwell_high_s
    seed: int = 0
    functions: int = 1000
    synthetic_rate: float = 3000.0
    upscale: str = "compress"
    path: Path | None = None
    model_map: Path | None = None

    @classmethod
    def from_kwargs(cls, **options: object) -> "TraceOptions":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise UserError(f"unknown trace option(s): {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        given = {k: v for k, v in options.items() if v is not None}
        if "models" in given and not isinstance(given["models"], tuple):
            given["models"] = tuple(given["models"])  # type: ignore[arg-type]
        return cls(**given)  # type: ignore[arg-type]

    def validate(self) -> None:
        """Every option in range (:mod:`shepherd.traces.checks`; named as the ``traces maf`` options)."""
        if self.day is not None:
            checks.count("--day", self.day, 1, checks.MAX_DAYS)
        if self.start_minute is not None:
            checks.count("--start-minute", self.start_minute, 1, checks.MINUTES_PER_DAY)
        checks.count("--duration-min", self.duration_min, 1, checks.MAX_DURATION_MIN)
        for option, value in (("--streams", self.streams), ("--sample", self.sample)):
            if value is not None:
                checks.count(option, value, 1)
        if self.load is not None:
            checks.positive("--rate", self.load, what="requests/s")
        checks.positive("--slo-ms", self.slo_ms, high=checks.MAX_SLO_MS, what="ms")
        self.bursty().validate()
        checks.count("--functions", self.functions, 1, checks.MAX_FUNCTIONS)
        checks.positive("--synthetic-rate", self.synthetic_rate, what="requests/s")
        checks.seed(self.seed)
        for model in self.models or ():
            checks.text("--models", model)
        if self.process is not None and self.process not in PROCESSES:
            raise UserError(f"unknown arrival process '{self.process}' (known: {', '.join(PROCESSES)})")
        if self.upscale not in maf2021.UPSCALE:
            raise UserError(f"unknown upscaling '{self.upscale}' (known: {', '.join(maf2021.UPSCALE)})")
        if self.models is not None and not self.models:
            raise UserError("the model list is empty")

    def model_list(self) -> list[str]:
        if self.models:
            return list(self.models)
        return list(dict.fromkeys(prof.read_builtin_raw(DEFAULT_MODEL_TABLE)["model"].to_list()))

    def bursty(self) -> expand.BurstyParams:
        return expand.BurstyParams(self.mmpp_ratio, self.mmpp_dwell_low, self.mmpp_dwell_high)


@dataclass
class Built:
    """A built named trace: the frame, its resolved config, its input files."""

    frame: pl.DataFrame
    config: dict
    inputs: list[Path]
    synthetic: bool


@dataclass(frozen=True)
class NamedTrace:
    name: str
    doc: str
    build: Callable[[TraceOptions], Built]
    synthetic: bool = False  #: generated data, not a production trace
    dataset: str | None = None  #: the downloaded dataset it reads (``shepherd traces fetch``); None: none needed
    packaged: str | None = None  #: real data shipped with the package: which subset of the dataset it is

    @property
    def kind(self) -> str:
        """``synthetic`` or ``real``: what every label of this trace says (``traces list``, reports)."""
        return "synthetic" if self.synthetic else "real"

    def data_status(self, registered: dict) -> str:
        """Where this trace's data comes from, given the local data registry (``fetch.read_registry()``)."""
        if self.synthetic:
            return "built in (generated, no data needed)"
        if self.packaged:
            return f"no download needed: {self.packaged}"
        entry = registered.get(self.dataset or "")
        if entry and Path(entry["path"]).exists():
            return f"{entry['how']}: {entry['path']}" + (f" (subset: {entry['subset']})" if entry.get("subset") else "")
        return f"missing — shepherd traces fetch {self.dataset}"


TRACES: dict[str, NamedTrace] = {}


def register(entry: NamedTrace) -> NamedTrace:
    TRACES[entry.name] = entry
    return entry


def lookup(name: str) -> NamedTrace | None:
    return TRACES.get(name)


def build(name: str, **options: object) -> Built:
    entry = TRACES.get(name)
    if entry is None:
        raise UserError(f"unknown trace '{name}' (known: {', '.join(TRACES)}; or a trace artifact file)")
    opts = TraceOptions.from_kwargs(**options)
    opts.validate()
    return entry.build(opts)


# --------------------------------------------------------------------------- counts → trace

def counts_to_trace(data: maf2019.MafCounts, opts: TraceOptions, process: str,
                    rng: np.random.Generator) -> tuple[pl.DataFrame, dict]:
    """Select streams, rescale, expand (stable / bursty) and assemble a trace frame."""
    chosen = maf2019.select_functions(data, top=opts.streams, sample=opts.sample, rng=rng)
    if chosen.functions == 0:
        raise UserError(f"{data.source}: no invocations in the selected window")
    total = int(chosen.counts.sum())
    factor = expand.load_factor(total, chosen.window_s, opts.load)
    checks.requests(total * factor, f"{data.source} over {chosen.minutes.size} minutes"
                    + (f" at --rate {opts.load:g}" if opts.load is not None else ""),
                    "shorten --duration-min, lower --rate or keep fewer --streams")
    if process == "stable":
        counts = expand.scale_counts(chosen.counts, factor, rng)
        arrival, stream = expand.expand_stable(counts, chosen.minutes, rng)
    else:
        arrival, stream = expand.expand_bursty(chosen.counts, chosen.minutes, rng, opts.bursty(), factor)
    stream_models = _stream_models(chosen.keys["HashFunction"], opts)
    frame = assemble(arrival, stream, stream_models, ms_to_us(opts.slo_ms))
    info = {
        "functions": chosen.functions, "native_requests": total,
        "native_rate_rps": total / chosen.window_s, "load_factor": factor,
        "first_minute": int(chosen.minutes[0]), "minutes": int(chosen.minutes.size),
        "span_us": int(round(chosen.window_s * 1e6)),
        "hash_functions_head": chosen.keys["HashFunction"].head(5).to_list(),
    }
    return frame, info


def _stream_models(functions: pl.Series, opts: TraceOptions) -> list[str]:
    """Model of each selected stream: round-robin, overridden by ``model_map`` where it has the function."""
    models = opts.model_list()
    names = [models[i % len(models)] for i in range(functions.len())]
    if opts.model_map is None:
        return names
    path = Path(opts.model_map)
    if not path.exists():
        raise UserError(f"model map not found: {path}")
    try:
        mapping = pl.read_csv(path, schema_overrides={"HashFunction": pl.String, "model": pl.String})
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise UserError(f"{path.name}: cannot read the model map ({str(exc).splitlines()[0]})") from None
    if not {"HashFunction", "model"} <= set(mapping.columns):
        raise UserError(f"{path.name}: a model map needs columns HashFunction,model")
    lookup = dict(zip(mapping["HashFunction"].to_list(), mapping["model"].to_list()))
    return [lookup.get(f) or names[i] for i, f in enumerate(functions.to_list())]


def assemble(arrival: np.ndarray, stream: np.ndarray, models: list[str], slo_us: int) -> pl.DataFrame:
    """A trace frame sorted by (arrival, stream); stream s → models[s] (one name per stream)."""
    arrival = np.asarray(arrival, dtype=np.int64)
    stream = np.asarray(stream, dtype=np.int64)
    n = max(len(models), 1)
    if arrival.size and 0 <= arrival.min() and arrival.max() < (1 << 62) // n and 0 <= stream.min():
        # a row is a function of (arrival, stream): sorting the one key arrival·n + stream gives the
        # lexsort's frame (ties are equal rows), several times faster on millions of rows
        key = np.sort(arrival * n + stream)
        arrival, stream = key // n, (key % n).astype(np.int32)
    else:
        order = np.lexsort((stream, arrival))
        arrival, stream = arrival[order], stream[order].astype(np.int32)
    return pl.DataFrame({
        "arrival_us": arrival,
        "stream": pl.Series(stream, dtype=pl.Int32),
        "model": pl.Series("model", list(models), dtype=pl.String).gather(stream) if stream.size
        else pl.Series("model", [], dtype=pl.String),
        "slo_us": np.full(arrival.size, slo_us, dtype=np.int64),
        "deadline_us": arrival + slo_us,
    })


def _config(name: str, opts: TraceOptions, process: str | None, synthetic: bool, info: dict) -> dict:
    cfg = {k: v for k, v in asdict(opts).items() if k not in ("path", "model_map")}
    if opts.model_map is not None:
        cfg["model_map"] = Path(opts.model_map).name
    cfg.update(trace=name, process=process, synthetic=synthetic, models=opts.model_list(), **info)
    return cfg


def _maf2019_where(opts: TraceOptions) -> Path:
    return Path(opts.path) if opts.path else fetch.dataset_path("maf2019")


def _maf2019_counts(opts: TraceOptions) -> maf2019.MafCounts:
    """Counts of the window; a single file holds one day (documented choice): ``day`` must be that
    day when the file's name says which (``…anon.dNN.csv``), and cannot be given at all when it
    does not (a sample's ``invocations.csv``) — an error rather than day 1's data under another name."""
    where = _maf2019_where(opts)
    if where.is_file():  # one invocation file (e.g. an imported subset): minutes from its header
        held = maf2019.file_day(where)
        if opts.day is not None and opts.day != held:
            holds = f"holds day {held} only" if held else "is one day of MAF 2019 whose day is not recorded"
            raise UserError(f"{where.name} {holds}, so --day {opts.day} cannot be honoured: drop --day, or "
                            f"point --path (or `shepherd traces import`) at the directory of day files")
        first = opts.start_minute or maf2019.read_header(where)[0]
        data = maf2019.read_day(where, first, first + opts.duration_min - 1)
        if held:
            data.minutes = data.minutes + (held - 1) * maf2019.MINUTES_PER_DAY
        return data
    return maf2019.read_window(where, opts.day or 1, opts.start_minute, opts.duration_min)


def _synthetic_counts(opts: TraceOptions, rng: np.random.Generator) -> maf2019.MafCounts:
    spec = maf_synthetic.SyntheticMafSpec(functions=opts.functions, rate_rps=opts.synthetic_rate)
    return maf_synthetic.generate(spec, rng, opts.day or 1, opts.start_minute or 1, opts.duration_min)


def load_counts(name: str, **options: object) -> maf2019.MafCounts:
    """Per-minute counts behind a MAF 2019 or maf-synthetic name (no arrival expansion).

    The synthetic counts are the same ones the named trace with the same seed expands.
    """
    entry = TRACES.get(name)
    if entry is None or entry.dataset == "maf2021":
        raise UserError(f"per-minute counts exist for maf2019* and maf-synthetic* traces, not '{name}'")
    whole_day = options.get("duration_min") is None
    opts = TraceOptions.from_kwargs(**options)
    if whole_day:  # default: the whole day, or every minute a single file holds from the start minute
        minutes = maf2019.MINUTES_PER_DAY if entry.synthetic else _minutes_held(opts)
        opts = replace(opts, duration_min=minutes)
    opts.validate()
    if entry.synthetic:
        return _synthetic_counts(opts, np.random.default_rng(opts.seed))
    return _maf2019_counts(opts)


def _minutes_held(opts: TraceOptions) -> int:
    """Minutes from the start minute to the last minute of the (single or day-``day``) file."""
    where = _maf2019_where(opts)
    header = maf2019.read_header(where if where.is_file() else maf2019.day_file(where, opts.day or 1))
    return max(1, header[-1] - (opts.start_minute or header[0]) + 1)


def maf2019_subset(path: Path | None = None) -> str | None:
    """The subset note of the MAF 2019 data at ``path`` (default: the cache), see
    :func:`shepherd.traces.maf2019.subset_of`; None when it is the full trace or is not there."""
    try:
        return maf2019.subset_of(Path(path) if path else fetch.dataset_path("maf2019"))
    except UserError:
        return None


def _maf2019(default_process: str) -> Callable[[TraceOptions], Built]:
    def run(opts: TraceOptions) -> Built:
        process = opts.process or default_process
        data = _maf2019_counts(opts)
        rng = np.random.default_rng(opts.seed)
        frame, info = counts_to_trace(data, opts, process, rng)
        info["source_files"] = [p.name for p in data.inputs]
        info["subset"] = maf2019.subset_of(_maf2019_where(opts))
        inputs = data.inputs + ([Path(opts.model_map)] if opts.model_map else [])
        return Built(frame, _config(f"maf2019-{process}", opts, process, False, info), inputs, False)
    return run


def _synthetic(default_process: str) -> Callable[[TraceOptions], Built]:
    def run(opts: TraceOptions) -> Built:
        process = opts.process or default_process
        rng = np.random.default_rng(opts.seed)
        data = _synthetic_counts(opts, rng)
        frame, info = counts_to_trace(data, opts, process, rng)
        info["generator"] = maf_synthetic.SyntheticMafSpec(functions=opts.functions,
                                                           rate_rps=opts.synthetic_rate).config()
        return Built(frame, _config(f"maf-synthetic-{process}", opts, process, True, info), [], True)
    return run


def _maf2021(opts: TraceOptions) -> Built:
    where = Path(opts.path) if opts.path else fetch.dataset_path("maf2021")
    start_s = ((opts.day or 1) - 1) * 86400.0 + ((opts.start_minute or 1) - 1) * 60.0
    out_s = opts.duration_min * 60.0
    rng = np.random.default_rng(opts.seed)
    models, slo = opts.model_list(), ms_to_us(opts.slo_ms)
    frame = maf2021.number_streams(maf2021.read_invocations(where, start_s, out_s), opts.streams)
    native = frame.height / out_s
    factor, scale = expand.load_factor(frame.height, out_s, opts.load), 1.0
    checks.requests(frame.height * factor, f"maf2021 over {opts.duration_min} minutes at --rate {opts.load}",
                    "shorten --duration-min or lower --rate")
    if opts.load is not None and opts.upscale == "compress":
        # Read factor × longer, then squeeze time by 1/factor (see maf2021 module doc).
        frame = maf2021.number_streams(maf2021.read_invocations(where, start_s, out_s * factor), opts.streams)
        scale = 1.0 / factor
        trace = maf2021.to_trace(frame, models, slo, scale)
        trace = trace.filter(pl.col("arrival_us") < int(out_s * 1e6))
    else:
        trace = maf2021.to_trace(frame, models, slo)
        if opts.load is not None:
            trace = expand.rescale_arrivals(trace, factor, rng, span_us=int(out_s * 1e6))
    info = {"native_rate_rps": native, "load_factor": factor, "time_scale": scale, "span_us": int(out_s * 1e6),
            "functions": int(trace["stream"].n_unique()) if trace.height else 0}
    inputs = [where / maf2021.FILE if where.is_dir() else where]
    return Built(trace, _config("maf2021", opts, None, False, info), inputs, False)


register(NamedTrace("maf2019", "MAF 2019, Poisson within each minute (= maf2019-stable; Shepherd §7)",
                    _maf2019("stable"), dataset="maf2019"))
register(NamedTrace("maf2019-stable", "MAF 2019, Poisson within each minute (Shepherd §7 'MAF-stable')",
                    _maf2019("stable"), dataset="maf2019"))
register(NamedTrace("maf2019-bursty", "MAF 2019, MMPP within each minute (Shepherd §7 'MAF-bursty')",
                    _maf2019("bursty"), dataset="maf2019"))
register(NamedTrace("maf2021", "MAF 2021 per-invocation arrivals, upscaled to --rate (PPipe §7.1 'Bursty')",
                    _maf2021, dataset="maf2021"))
# --------------------------------------------------------------------------- packaged real sample

#: the packaged real MAF 2019 subset (package data; CC-BY 4.0, attribution in its README/LICENSE)
SAMPLE_DIR = Path(__file__).resolve().parent / "data" / "maf2019_sample"
SAMPLE_FILE = SAMPLE_DIR / "invocations-500x480.parquet"
SAMPLE_SUBSET = "packaged real sample, 500 functions × 8 h (minutes 480…959 of one day)"


def sample_counts(opts: TraceOptions) -> maf2019.MafCounts:
    """The packaged real sample's counts for the options' window (default: from its first
    minute, 480, for ``duration_min`` minutes); an error outside the 8 hours it holds."""
    frame = pl.read_parquet(SAMPLE_FILE)
    minute_cols = [c for c in frame.columns if c.isdigit()]
    held = np.asarray([int(c) for c in minute_cols], dtype=np.int64)
    if opts.day not in (None, 1):
        raise UserError("maf2019-sample holds one day (which one is not recorded): drop --day")
    first = opts.start_minute or int(held[0])
    last = first + opts.duration_min - 1
    if first < held[0] or last > held[-1]:
        raise UserError(f"maf2019-sample holds minutes {held[0]}…{held[-1]} only; asked for {first}…{last}: "
                        "use --start-minute/--duration-min inside them, or fetch the full trace (maf2019)")
    cols = [str(m) for m in range(first, last + 1)]
    counts = frame.select(cols).to_numpy().astype(np.int64)
    keys = frame.select(list(maf2019.KEY_COLUMNS))
    return maf2019.MafCounts(keys, np.arange(first - 1, last, dtype=np.int64), counts, "maf2019-sample",
                             [SAMPLE_FILE])


def _sample(default_process: str) -> Callable[[TraceOptions], Built]:
    def run(opts: TraceOptions) -> Built:
        process = opts.process or default_process
        data = sample_counts(opts)
        frame, info = counts_to_trace(data, opts, process, np.random.default_rng(opts.seed))
        info["source_files"] = [SAMPLE_FILE.name]
        info["subset"] = SAMPLE_SUBSET
        info["real"] = True
        name = "maf2019-sample" if process == "stable" else "maf2019-sample-bursty"
        return Built(frame, _config(name, opts, process, False, info), [], False)
    return run


register(NamedTrace("maf2019-sample", "REAL MAF 2019 subset (packaged, 500 functions × 8 h, CC-BY 4.0), "
                    "Poisson within each minute", _sample("stable"), packaged=SAMPLE_SUBSET))
register(NamedTrace("maf2019-sample-bursty", "REAL MAF 2019 subset (packaged, 500 functions × 8 h, CC-BY 4.0), "
                    "MMPP within each minute", _sample("bursty"), packaged=SAMPLE_SUBSET))

register(NamedTrace("maf-synthetic", "SYNTHETIC MAF-2019-like counts, Poisson within each minute (no data needed)",
                    _synthetic("stable"), synthetic=True))
register(NamedTrace("maf-synthetic-bursty", "SYNTHETIC MAF-2019-like counts, MMPP within each minute",
                    _synthetic("bursty"), synthetic=True))
