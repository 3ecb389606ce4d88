"""The one benchmark report: rows of (benchmark, metric, baseline, ours, ratio, target, met) written as
benchmarks/results/REPORT.md, one PNG per benchmark (ours vs baseline), and REPORT.json for tools."""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from textwrap import fill

RESULTS = Path(__file__).resolve().parent / "results"


def pct(values: list[float], q: float) -> float:
    """The q-quantile of `values` (nearest rank); NaN when there are none."""
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


@contextmanager
def kafka_and_folder(settings, prefix: str = "credence-bench-") -> Iterator[tuple[str, Path]]:
    """(bootstrap, a scratch folder) for a benchmark run by itself: the configured Kafka, or an embedded
    broker started in the folder and stopped after the block."""
    from credence.streams.ops.broker import configured_or_embedded

    with tempfile.TemporaryDirectory(prefix=prefix) as tmp, \
            configured_or_embedded(settings, Path(tmp) / "broker") as bootstrap:
        yield bootstrap, Path(tmp)


async def create_topics(bootstrap: str, names: list[str], partitions: int, kafka=None) -> None:
    """Plain topics of one replica, outside credence's registry: a benchmark's own baseline topics."""
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    from credence.kafka import client_options

    admin = AIOKafkaAdminClient(**client_options(bootstrap, kafka))
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, partitions, 1) for name in names])
    finally:
        await admin.close()


@dataclass
class Row:
    benchmark: str
    metric: str
    ours: float
    baseline: float | None = None  # measured in the same run (or computed from the same input: see note)
    target: str = ""  # e.g. "<= 0.2", ">= 0.7", "ratio >= 0.05"
    unit: str = ""
    baseline_label: str = ""
    note: str = ""
    ratio: float | None = field(default=None)

    def __post_init__(self) -> None:
        if self.ratio is None and self.baseline not in (None, 0):
            self.ratio = self.ours / self.baseline

    @property
    def met(self) -> bool | None:
        """Whether `target` holds ("<= x" / ">= x" on ours, or "ratio <= x" / "ratio >= x")."""
        if not self.target:
            return None
        words = self.target.split()
        value = self.ratio if words[0] == "ratio" else self.ours
        op, bound = words[-2], float(words[-1].rstrip("%")) / (100 if words[-1].endswith("%") else 1)
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return None
        return value <= bound if op == "<=" else value >= bound


def _fmt(value: float | None) -> str:
    if value is None:
        return "—"
    if value == 0 or 0.01 <= abs(value) < 100_000:
        return f"{value:,.3g}" if abs(value) < 10 else f"{value:,.1f}"
    return f"{value:.3g}"


def markdown(rows: list[Row], header: str, failures: dict[str, str]) -> str:
    lines = [f"# credence benchmark report\n\n{header}\n",
             "| benchmark | metric | baseline | ours | ratio | target | met |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        met = {True: "yes", False: "**no**", None: "—"}[r.met]
        base = f"{_fmt(r.baseline)} ({r.baseline_label})" if r.baseline_label else _fmt(r.baseline)
        lines.append(f"| {r.benchmark} | {r.metric}{f' ({r.unit})' if r.unit else ''} | {base} | {_fmt(r.ours)} | "
                     f"{_fmt(r.ratio)} | {r.target or '—'} | {met} |")
    notes = [f"- **{r.benchmark} / {r.metric}**: {r.note}" for r in rows if r.note]
    if notes:
        lines += ["", "## Notes", *notes]
    if failures:
        lines += ["", "## Benchmarks that did not run", *[f"- **{k}**: {v}" for k, v in failures.items()]]
    return "\n".join(lines) + "\n"


def plot(rows: list[Row], out_dir: Path) -> list[Path]:
    """One bar chart per benchmark: baseline and ours per metric, each metric on its own scale."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    for name in dict.fromkeys(r.benchmark for r in rows):
        mine = [r for r in rows if r.benchmark == name]
        cols = min(4, len(mine))
        grid = math.ceil(len(mine) / cols)
        fig, axes = plt.subplots(grid, cols, figsize=(3.4 * cols, 3.0 * grid), squeeze=False)
        for ax in axes.flat[len(mine):]:
            ax.set_visible(False)
        for ax, r in zip(axes.flat, mine):
            labels, values = ["ours"], [r.ours]
            if r.baseline is not None:
                labels.insert(0, "baseline")
                values.insert(0, r.baseline)
            colour = {True: "#2f855a", False: "#c53030", None: "#2b6cb0"}[r.met]
            ax.bar(labels, values, color=["#999999", colour][-len(values):])
            words = r.target.split()
            if len(words) == 2:  # an absolute target on ours ("<= 20"): drawn where it lies
                ax.axhline(float(words[1].rstrip("%")) / (100 if words[1].endswith("%") else 1),
                           color="#444444", linestyle="--", linewidth=0.8)
            ax.set_title(fill(f"{r.metric}" + (f" ({r.unit})" if r.unit else ""), 38)
                         + (f"\ntarget {r.target}" if r.target else ""), fontsize=8)
            ax.tick_params(labelsize=7)
        fig.suptitle(name, fontsize=10)
        fig.tight_layout()
        path = out_dir / _png(name)
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths


def _png(name: str) -> str:
    return f"{name.replace(' ', '_').replace('/', '_')}.png"


def committed(out_dir: Path = RESULTS) -> tuple[list[Row], str]:
    """The report's rows (REPORT.json) and its header text (REPORT.md, between the title and the table)."""
    path, md = out_dir / "REPORT.json", out_dir / "REPORT.md"
    if not path.exists():
        raise FileNotFoundError(f"no report to merge into: {path} does not exist")
    rows = [Row(**{k: v for k, v in r.items() if k != "met"}) for r in json.loads(path.read_text())]
    header = md.read_text().split("\n| benchmark |")[0].partition("# credence benchmark report\n\n")[2].rstrip() \
        if md.exists() else ""
    return rows, header


def merged(old: list[Row], new: list[Row]) -> list[Row]:
    """`old` with `new` merged in: a row measured again (same benchmark and metric) replaces the old one
    where it stands; a new row goes after the last row of its benchmark (or at the end). So one benchmark
    re-run (`python -m benchmarks --only NAME --merge`) updates its rows without re-running every other
    benchmark and without dropping their rows."""
    rows = list(old)
    for r in new:
        keys = [(o.benchmark, o.metric) for o in rows]
        if (r.benchmark, r.metric) in keys:
            rows[keys.index((r.benchmark, r.metric))] = r
            continue
        same = [i for i, o in enumerate(rows) if o.benchmark == r.benchmark]
        rows.insert(same[-1] + 1 if same else len(rows), r)
    return rows


def write(rows: list[Row], header: str, failures: dict[str, str], out_dir: Path = RESULTS,
          plotted: set[str] | None = None) -> Path:
    """REPORT.md, REPORT.json and the plots; `plotted` (benchmark names) redraws only those, keeping the
    other benchmarks' PNGs as they are."""
    out_dir.mkdir(parents=True, exist_ok=True)
    report = out_dir / "REPORT.md"
    plot(rows if plotted is None else [r for r in rows if r.benchmark in plotted], out_dir) if rows else []
    images = [out_dir / _png(n) for n in dict.fromkeys(r.benchmark for r in rows) if (out_dir / _png(n)).exists()]
    text = markdown(rows, header, failures)
    if images:
        text += "\n## Plots\n\n" + "\n".join(f"![{p.stem}]({p.name})" for p in images) + "\n"
    report.write_text(text)
    (out_dir / "REPORT.json").write_text(json.dumps([asdict(r) | {"met": r.met} for r in rows], indent=1))
    return report
