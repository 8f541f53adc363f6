#!/usr/bin/env python3
"""Write the reference pages of the docs site from `tally plugins --json`.

    scripts/gen-docs.py build-ci/bin/tally          # runs `tally plugins --json` (ASan-safe)
    scripts/gen-docs.py plugins.json                # or reads that output from a file

Writes docs/reference/ (git-ignored, made anew each time; scripts/docs.sh runs this before
`mkdocs build --strict`):

  reference/index.md                 the three kinds, with links
  reference/metrics.md, readers.md, backends.md   one table per kind: name, aliases, plugin, summary
  reference/metric/<name>.md         one page per metric: doc, the reference it names, parameters,
                                     inputs, result keys with their direction, the documented
                                     `// Example:` of its source, and the example configs using it
  reference/reader/<name>.md, reference/backend/<name>.md   the same for readers and backends

The per-component pages are reached from the kind's table (mkdocs.yml's `not_in_nav` lists
them; the tables are in the nav). Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KINDS = [("metric", "Metrics"), ("reader", "Readers"), ("backend", "Backends")]


def load_components(source: str) -> list:
    """The components of `tally plugins --json`: from a JSON file, or by running the binary."""
    path = Path(source)
    if path.suffix == ".json" or (path.is_file() and not os.access(path, os.X_OK)):
        return json.loads(path.read_text(encoding="utf-8"))
    env = dict(os.environ)
    env.setdefault("ASAN_OPTIONS", "detect_leaks=0")  # an ASan build reports leaks at exit
    out = subprocess.run([str(path), "plugins", "--json"], check=True, capture_output=True,
                         text=True, env=env)
    return json.loads(out.stdout)


def slug(name: str) -> str:
    """A file name for a component name: letters, digits, '_' and '-' kept, the rest '-'."""
    s = re.sub(r"[^A-Za-z0-9_-]", "-", name).strip("-")
    return s or "component"


def escape(text: str) -> str:
    """Markdown text from plain text: outside `code spans`, characters that Markdown would read
    as markup (emphasis, links, HTML, table cells) are escaped."""
    parts = str(text).split("`")
    for i in range(0, len(parts), 2):  # even parts are outside backticks
        p = parts[i].replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        p = re.sub(r"([\\*_\[\]|#])", r"\\\1", p)
        parts[i] = p
    if len(parts) % 2 == 0:  # an unpaired backtick: escape it
        parts[-2] = parts[-2] + "\\`" + parts.pop()
    out = "`".join(parts)
    return out.replace("\n", " ")


def code(text) -> str:
    """A code span for any text (a backtick inside gets a longer fence)."""
    s = str(text).replace("|", "\\|").replace("\n", " ")
    fence = "``" if "`" in s else "`"
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def value_text(v) -> str:
    return json.dumps(v) if not isinstance(v, str) else v


def first_sentence(doc: str, limit: int = 160) -> str:
    m = re.match(r"(.+?[.:;])(\s|$)", doc)
    s = m.group(1) if m else doc
    if len(s) > limit:
        s = s[: limit - 3].rsplit(" ", 1)[0] + " ..."
    return s


def reference_of(doc: str) -> str | None:
    m = re.search(r"Reference:\s*(.+)$", doc, re.S)
    return m.group(1).strip() if m else None


def curated_references() -> dict:
    """The `reference` column of docs/components.md's table, by name and alias."""
    refs = {}
    page = ROOT / "docs" / "components.md"
    if not page.exists():
        return refs
    for line in page.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if len(cells) != 4 or cells[0] not in ("metric", "reader", "backend") or not cells[3]:
            continue
        for name in re.findall(r"`([^`]+)`", cells[1]):
            refs[(cells[0], name)] = cells[3]
    return refs


def source_examples() -> dict:
    """Each metric source's `// Example:` comment, by the name its first line gives (as
    tests/unit/test_doc_examples.cpp reads them: "// ConfusionMatrix: the K x K counts ...")."""
    examples = {}
    for f in sorted((ROOT / "plugins").rglob("*.cpp")):
        lines = f.read_text(encoding="utf-8", errors="replace").splitlines()
        if not lines or not lines[0].startswith("// "):
            continue
        name = lines[0][3:].split(":", 1)[0].split()[0] if lines[0][3:].strip() else ""
        for i, line in enumerate(lines):
            if not line.startswith("// Example"):
                continue
            block = [line[3:]]
            for more in lines[i + 1:]:
                if not more.startswith("//") or more.strip() == "//" or more.startswith("// Example"):
                    break
                block.append(more[3:] if more.startswith("// ") else more[2:])
            examples.setdefault(name, []).append(("\n".join(block), f.relative_to(ROOT)))
    return examples


def config_entries() -> dict:
    """(kind, type) -> [(config path, the entry's YAML text)] over configs/examples/*.yaml:
    each `metrics:` item, the `data:` block (its reader) and a `backend:` block."""
    uses = {}
    for cfg in sorted((ROOT / "configs" / "examples").glob("*.yaml")):
        lines = cfg.read_text(encoding="utf-8").splitlines()
        blocks, current = {}, None
        for line in lines:  # top-level blocks
            if re.match(r"[A-Za-z_]", line):
                current = line.split(":", 1)[0]
                blocks[current] = [line]
            elif current is not None:
                blocks[current].append(line)
        rel = cfg.relative_to(ROOT)
        for top, kind in (("data", "reader"), ("backend", "backend")):
            text = trim(blocks.get(top, []))
            m = re.search(r"^\s+type:\s*([A-Za-z0-9_]+)", "\n".join(text), re.M)
            if m:
                uses.setdefault((kind, m.group(1)), []).append((rel, "\n".join(text)))
        item = []
        for line in blocks.get("metrics", [])[1:] + ["<end>"]:
            if re.match(r"\s*- ", line) or line == "<end>" or re.match(r"\S", line):
                if item:
                    text = trim(item)
                    m = re.search(r"type:\s*([A-Za-z0-9_]+)", "\n".join(text))
                    if m:
                        uses.setdefault(("metric", m.group(1)), []).append(
                            (rel, "metrics:\n" + "\n".join(text)))
                item = [line] if re.match(r"\s*- ", line) else []
            elif item:
                item.append(line)
    return uses


def trim(lines: list) -> list:
    while lines and (not lines[-1].strip() or lines[-1].lstrip().startswith("#")):
        lines = lines[:-1]
    return lines


def table(header: list, rows: list) -> list:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out + [""]


def component_page(c: dict, refs: dict, examples: dict, uses: dict) -> str:
    kind, name = c["kind"], c["name"]
    lines = [f"# {name}", ""]
    facts = [f"**Kind**: {kind}", f"**Plugin**: {code(c['plugin'])} {escape(c.get('version', ''))}"]
    if c.get("aliases"):
        facts.append("**Aliases**: " + ", ".join(code(a) for a in c["aliases"]))
    lines += ["  \n".join(facts), "", escape(c["doc"]), ""]
    ref = reference_of(c["doc"])
    curated = refs.get((kind, name))
    if ref or curated:
        lines += ["## Reference", ""]
        if ref:
            lines += [f"The values are checked against: {escape(ref)}", ""]
        if curated:
            lines += [f"Test suite reference (`tests/reference/`): {curated}", ""]
    if c.get("params"):
        lines += ["## Parameters", ""]
        rows = []
        for p in c["params"]:
            default = "required" if p.get("required") else code(value_text(p.get("default")))
            if p.get("nullable"):
                default += " (may be null)"
            choices = ", ".join(code(x) for x in p.get("choices") or [])
            rows.append([code(p["name"]), escape(p["type"]), default, choices, escape(p["doc"])])
        lines += table(["name", "type", "default", "choices", "what"], rows)
    if c.get("inputs"):
        lines += ["## Inputs", "", "Fields of each batch (a metric entry's `inputs:` maps them to "
                  "other data field names).", ""]
        rows = [[code(i["name"]), "yes" if i.get("required") else "no", escape(i["doc"])]
                for i in c["inputs"]]
        lines += table(["field", "required", "what"], rows)
    if c.get("results"):
        lines += ["## Result keys", "", "Globs over the keys of this metric's results; the first "
                  "that matches a key gives its direction for `tally compare` and the reports.", ""]
        better = {"higher": "higher is better", "lower": "lower is better", "neither": "no direction"}
        rows = [[code(r["key"]), better.get(r["better"], escape(r["better"])), escape(r["plot"]),
                 escape(r["doc"])] for r in c["results"]]
        lines += table(["key", "direction", "plot", "what"], rows)
    if kind == "metric" and name in examples:
        lines += ["## Example", ""]
        for text, src in examples[name]:
            lines += [f"From `{src}` (run by `tests/unit/test_doc_examples.cpp`):", "", "```text",
                      text, "```", ""]
    used = []
    for n in [name] + list(c.get("aliases") or []):
        used += uses.get((kind, n), [])
    lines += ["## Used in", ""]
    if kind == "backend":
        lines += [f"Chosen with `backend: {{type: {name}}}` in a config or `--set backend.type={name}` "
                  "on the command line ([Distributed runs](../../distributed.md)).", ""]
    if used:
        for cfg, snippet in used:
            lines += [f"`{cfg}`:", "", "```yaml", snippet, "```", ""]
    else:
        lines += ["No example config in `configs/examples/` uses it.", ""]
    return "\n".join(lines)


def write(out: Path, components: list) -> None:
    refs, examples, uses = curated_references(), source_examples(), config_entries()
    if out.exists():
        shutil.rmtree(out)
    index = ["# Metrics, readers and backends", "",
             "Generated from `tally plugins --json` of the build the site was made from: every "
             "component the built-in plugins register, with its parameters, inputs and result keys.",
             ""]
    for kind, title in KINDS:
        comps = sorted((c for c in components if c["kind"] == kind), key=lambda c: c["name"].lower())
        (out / kind).mkdir(parents=True, exist_ok=True)
        taken = {}
        rows = []
        for c in comps:
            base = slug(c["name"])
            n = taken.get(base.lower(), 0)
            taken[base.lower()] = n + 1
            fname = base if n == 0 else f"{base}-{n + 1}"
            (out / kind / f"{fname}.md").write_text(component_page(c, refs, examples, uses),
                                                    encoding="utf-8")
            aliases = ", ".join(code(a) for a in c.get("aliases") or [])
            rows.append([f"[{escape(c['name'])}]({kind}/{fname}.md)", aliases, code(c["plugin"]),
                         escape(first_sentence(c["doc"]))])
        page = [f"# {title}", "", f"{len(comps)} {title.lower()}, from `tally plugins --json`.", ""]
        page += table(["name", "aliases", "plugin", "what"], rows)
        (out / f"{title.lower()}.md").write_text("\n".join(page), encoding="utf-8")
        index.append(f"- [{title}]({title.lower()}.md): {len(comps)}")
    index += ["", "The same list with the test suite's references, by task: "
              "[Built-in components](../components.md).", ""]
    (out / "index.md").write_text("\n".join(index), encoding="utf-8")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("source", help="the tally binary, or a file holding `tally plugins --json`")
    ap.add_argument("--out", default=str(ROOT / "docs" / "reference"),
                    help="output folder (default docs/reference)")
    args = ap.parse_args()
    components = load_components(args.source)
    if not components:
        print("gen-docs: `tally plugins --json` listed no component", file=sys.stderr)
        return 1
    write(Path(args.out), components)
    print(f"gen-docs: {len(components)} components -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
