#!/usr/bin/env python3
"""Puts a benchmark run's tables and plots into docs/performance.md (tests/bench/regenerate.sh).

  render_doc.py DOC RESULTS PLOTS_DIR PNG_DIR

- Every RESULTS/NAME.md (a markdown fragment a benchmark wrote) replaces what DOC holds between the lines
  `<!-- generated:NAME -->` and `<!-- end:NAME -->`. A fragment without its block in DOC is an error (the
  doc would silently keep old figures); a block without a fragment keeps its text and is listed.
- Every PLOTS_DIR/NAME.gp whose RESULTS/NAME.dat exists (or the file its line `# data: FILE.dat` names) is
  drawn by gnuplot into PNG_DIR/NAME.png (`gnuplot -e "in='...'; out='...'" NAME.gp`).
Prints what it did; exits 1 on any error, leaving DOC untouched.
"""
import pathlib
import re
import subprocess
import sys


def render(doc: pathlib.Path, results: pathlib.Path, plots: pathlib.Path, png_dir: pathlib.Path) -> int:
    text = doc.read_text()
    errors, done = [], []
    for fragment in sorted(results.glob("*.md")):
        name = fragment.stem
        pattern = re.compile(
            r"(<!-- generated:%s -->\n).*?(<!-- end:%s -->)" % (re.escape(name), re.escape(name)), re.S)
        if not pattern.search(text):
            errors.append(f"{doc}: no <!-- generated:{name} --> ... <!-- end:{name} --> block for {fragment}")
            continue
        body = fragment.read_text().strip() + "\n"
        text = pattern.sub(lambda m: m.group(1) + body + m.group(2), text, count=1)
        done.append(name)
    blocks = set(re.findall(r"<!-- generated:([\w-]+) -->", text))
    kept = sorted(blocks - set(done))

    drawn = []
    png_dir.mkdir(parents=True, exist_ok=True)
    for script in sorted(plots.glob("*.gp")):
        declared = re.search(r"^# data: (\S+)$", script.read_text(), re.M)
        data = results / (declared.group(1) if declared else script.stem + ".dat")
        if not data.exists():
            continue
        png = png_dir / (script.stem + ".png")
        cmd = ["gnuplot", "-e", f"in='{data}'; out='{png}'", str(script)]
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0 or not png.exists():
            errors.append(f"gnuplot {script.name}: exit {run.returncode}: {run.stderr.strip()[:500]}")
        else:
            drawn.append(png.name)

    if errors:
        for e in errors:
            print("render_doc: " + e, file=sys.stderr)
        return 1
    doc.write_text(text)
    print(f"render_doc: {doc}: blocks rewritten: {', '.join(done) or 'none'}; "
          f"kept as they were: {', '.join(kept) or 'none'}")
    print(f"render_doc: plots drawn in {png_dir}: {', '.join(drawn) or 'none'}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 5:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(render(*(pathlib.Path(a) for a in sys.argv[1:])))
