"""The results as a static site: ``make site`` (``python -m dgro_lib.cli.site``) builds ``build/site/`` from
``reference/<profile>/`` with MkDocs (Material theme) and mkdocs-jupyter.

Why MkDocs + mkdocs-jupyter: the executed reference notebooks already hold every figure as an inline PNG, so the
site only has to render them, not execute anything; mkdocs-jupyter does that through nbconvert (already in the
notebook stack), honours cell tags (a ``hide-output`` cell's output is left out: the run logs), and the whole tool
chain is pure Python from PyPI, installed from the project's lock with everything else. Jupyter Book 2 (mystmd)
needs Node.js and fetches its themes at build time, which a machine without internet cannot do.

The site holds:

* ``index.md`` — the README, the entry point (its links into ``docs/`` and ``reference/`` rewritten to the site's
  pages; a link to a source file becomes plain text);
* ``claims.md`` — every claim of every ``claims.csv``: paper, notebook, verdict, estimate [95 % CI], seeds, MDE, with
  links to its notebook's page and verdict figure, filterable by paper, notebook, verdict and source
  (``js/claims.js``);
* ``notebooks/<name>.ipynb`` — one page per executed reference notebook, its figures inline, logs hidden;
* ``docs/*.md`` — the documentation pages.

The site loads nothing from the network (checked after every build): it must open on a machine without internet,
and a results page that silently needs a CDN is a broken page there.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd

from dgro_lib.cli.results import ORDER
from dgro_lib.report.claims import DISPLAY, claim_cells, read_claims
from dgro_lib.util.paths import REPO

__all__ = ["build_site", "stage_site", "claims_index", "rewrite_links", "PAPERS", "main"]

BUILD = REPO / "build"
# the paper each notebook reproduces, by its name's prefix; 00_/01_ describe the miniature itself
PAPERS = {"dgro": "DGRO", "dcpo": "DCPO"}
# an element that loads a resource from another host: the site must have none
_EXTERNAL = re.compile(r"""<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)\s*=\s*["'](?:https?:)?//""", re.I)
_LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")


def paper_of(notebook: str) -> str:
    return PAPERS.get(notebook.split("_", 1)[0], "miniature")


def _notebooks(reference: Path) -> list[str]:
    return sorted(p.parent.name for p in reference.glob("*/*.ipynb") if p.stem == p.parent.name)


def rewrite_links(text: str, src: str, pages: dict[str, str]) -> str:
    """``text``, a Markdown file at repository path ``src`` (e.g. ``docs/results.md``), with each relative link
    pointed at the site: ``pages`` maps a repository path (a file, or a folder ending in ``/``) to its site path
    (``README.md`` -> ``index.md``, ``reference/cpu/<nb>/`` -> ``notebooks/<nb>.ipynb``). A link to any other
    repository file (a source file, a CSV) keeps its text and loses its target: the site does not serve the
    repository. Absolute URLs and in-page anchors are left as they are."""
    here = os.path.dirname(src)
    site_here = os.path.dirname(pages.get(src, src))

    def repl(m: re.Match) -> str:
        bang, label, target = m.groups()
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            return m.group(0)
        path, _, anchor = target.partition("#")
        resolved = os.path.normpath(os.path.join(here, path)) + ("/" if path.endswith("/") else "")
        site = pages.get(resolved)
        if site is None:  # a folder of a notebook's reference outputs, or a file inside it
            parts = resolved.split("/")
            if len(parts) >= 3 and parts[0] == "reference":
                site = pages.get("/".join(parts[:3]) + "/")
        if site is None:
            return label if not bang else f"*({label})*"
        rel = os.path.relpath(site, site_here or ".")
        return f"{bang}[{label}]({rel}{'#' + anchor if anchor else ''})"

    return _LINK.sub(repl, text)


def claims_index(reference: Path, figures: dict[str, str]) -> str:
    """The claims page (Markdown with one HTML table): every row of every ``<reference>/<nb>/claims.csv``, with
    ``data-`` attributes that ``js/claims.js`` filters on; ``figures`` maps a notebook to its verdict figure's site
    path."""
    rows, every = [], []
    present = _notebooks(reference)
    # the papers' figures and tables in the README's order, then the notebooks about the miniature itself
    ordered = [nb for nb in ORDER if nb in present] + [nb for nb in present if nb not in ORDER]
    for nb in ordered:
        path = reference / nb / "claims.csv"
        if not path.is_file():
            continue
        table = read_claims(path)
        judged = table["verdict"] != "estimate"
        for r in pd.concat([table[judged], table[~judged]]).itertuples():
            cells = dict(zip(DISPLAY, claim_cells(r)))
            attrs = {"paper": paper_of(nb), "notebook": nb, "verdict": str(r.verdict), "source": str(r.source)}
            fig = (f'<a href="{figures[nb]}">figure</a>' if nb in figures else "")
            tds = [attrs["paper"], f'<a href="notebooks/{nb}.html">{nb}</a>',
                   *(html.escape(cells[c]) for c in DISPLAY[:-1]), html.escape(cells["verdict"]), attrs["source"], fig]
            data = " ".join(f'data-{k}="{html.escape(v)}"' for k, v in attrs.items())
            rows.append(f"<tr {data}>" + "".join(f"<td>{t}</td>" for t in tds) + "</tr>")
            every.append(attrs)
    frame = pd.DataFrame(every)
    selects = []
    for key, label in [("paper", "Paper"), ("notebook", "Notebook"), ("verdict", "Verdict"), ("source", "Source")]:
        options = "".join(f'<option value="{html.escape(v)}">{html.escape(v)}</option>'
                          for v in sorted(frame[key].unique()))
        selects.append(f'<label>{label} <select data-filter="{key}"><option value="">all</option>{options}'
                       "</select></label>")
    head = ["paper", "notebook", *DISPLAY[:-1], "verdict", "source", "figure"]
    counts = frame[frame["source"] == "paper"]["verdict"].value_counts()
    return "\n".join([
        "---", "hide: [navigation, toc]  # the table needs the page's width", "---", "",
        "# Every claim", "",
        f"{len(frame)} rows from the reference notebooks' `claims.csv` files: "
        f"{int(counts.drop('estimate', errors='ignore').sum())} judged claims of the papers "
        f"({', '.join(f'{v} {n}' for v, n in counts.items() if v != 'estimate')}), the project's own checks "
        "(source `project`) and plain estimates (verdict `estimate`). Filter by paper, notebook, verdict and source; "
        "each row links to its notebook and to the notebook's verdict figure. How a verdict is reached: "
        "[the statistics](docs/statistics.md).", "",
        '<div class="claims-filters">' + " ".join(selects) + ' <span id="claims-count"></span></div>', "",
        '<table id="claims"><thead><tr>' + "".join(f"<th>{h}</th>" for h in head) + "</tr></thead><tbody>",
        *rows, "</tbody></table>", ""])


_CLAIMS_JS = """// The claims page's filters: a row is shown when it matches every chosen value.
document.addEventListener("DOMContentLoaded", function () {
  var table = document.getElementById("claims");
  if (!table) return;
  var selects = document.querySelectorAll("select[data-filter]");
  var count = document.getElementById("claims-count");
  function apply() {
    var shown = 0, rows = table.tBodies[0].rows;
    for (var i = 0; i < rows.length; i++) {
      var ok = true;
      selects.forEach(function (s) { if (s.value && rows[i].dataset[s.dataset.filter] !== s.value) ok = false; });
      rows[i].style.display = ok ? "" : "none";
      if (ok) shown++;
    }
    count.textContent = shown + " of " + rows.length + " rows";
  }
  selects.forEach(function (s) { s.addEventListener("change", apply); });
  apply();
});
"""

_HOOKS = '''"""MkDocs hooks of the results site (written by dgro_lib.cli.site).

nbconvert's HTML template loads MathJax from a CDN on every notebook page. The notebooks hold no TeX (the build
checks it), so the loader and its configuration are dropped: the site then loads nothing from the network."""
import re

_MATHJAX = re.compile(r"<!-- Load mathjax -->.*?<!-- End of mathjax configuration -->", re.S)


def on_post_page(output, page, config):
    return _MATHJAX.sub("", output)
'''


def _mkdocs_yml(nav_notebooks: list[str], docs: list[str], cache: Path) -> str:
    nav = ["  - Home: index.md", "  - Every claim: claims.md", "  - Notebooks:",
           *(f"      - {nb}: notebooks/{nb}.ipynb" for nb in nav_notebooks), "  - Docs:",
           *(f"      - {d[:-3]}: docs/{d}" for d in docs)]
    return "\n".join([
        "# Written by dgro_lib.cli.site (make site); not edited by hand.",
        "site_name: dgro_lib results",
        "docs_dir: site-src",
        "site_dir: site",
        "use_directory_urls: false  # one .html per page: the site also opens from the file system",
        "theme:",
        "  name: material",
        "  font: false  # no Google Fonts: the site loads nothing from the network",
        "  features: [navigation.sections]",
        "markdown_extensions:",
        "  - tables",
        "  - attr_list",
        "  - toc:",
        "      permalink: true",
        "      slugify: !!python/object/apply:pymdownx.slugs.slugify {kwds: {case: lower}}  # GitHub's anchors",
        "plugins:",
        "  - search",
        "  - mkdocs-jupyter:",
        "      include_source: false",
        "      execute: false",
        "      ignore_h1_titles: false",
        f"      cache_dir: {cache}",
        "      remove_tag_config:",
        "        remove_all_outputs_tags: [hide-output]",
        "        remove_input_tags: [hide-input]",
        "hooks: [site_hooks.py]",
        "extra_javascript: [js/claims.js]",
        "extra_css: [css/site.css]",
        "validation:",
        "  omitted_files: warn",
        "  absolute_links: warn",
        "  unrecognized_links: warn",
        "  anchors: warn",
        "nav:", *nav, ""])


_CSS = """/* the claims table: compact, the claim column wide */
.md-grid { max-width: 90rem; }
#claims { font-size: 0.68rem; border-collapse: collapse; }
#claims td, #claims th { padding: 0.2em 0.5em; border-bottom: 1px solid #ddd; vertical-align: top; }
#claims td:nth-child(3) { min-width: 22em; }
#claims td:nth-child(5) { white-space: nowrap; }
#claims tr[data-verdict="reproduced"] td:nth-child(9) { background: #d9f2d9; }
#claims tr[data-verdict="contradicted"] td:nth-child(9) { background: #f8d7d7; }
#claims tr[data-verdict="inconclusive"] td:nth-child(9) { background: #eeeeee; }
#claims tr[data-verdict="not testable at this scale"] td:nth-child(9) { background: #fff3cd; }
.claims-filters select { margin-right: 1em; }
"""


def stage_site(profile: str = "cpu", *, build: Path = BUILD) -> Path:
    """Write the MkDocs sources of the site into ``<build>/site-src`` and its config ``<build>/mkdocs.yml`` from
    ``reference/<profile>/``, the README and ``docs/``; returns the config's path."""
    reference = REPO / "reference" / profile
    notebooks = _notebooks(reference)
    if not notebooks:
        raise FileNotFoundError(f"{reference}: no executed reference notebooks (<name>/<name>.ipynb)")
    stage = build / "site-src"
    shutil.rmtree(stage, ignore_errors=True)
    (stage / "notebooks").mkdir(parents=True)
    docs = sorted(p.name for p in (REPO / "docs").glob("*.md"))
    pages = {"README.md": "index.md", **{f"docs/{d}": f"docs/{d}" for d in docs}}
    for nb in notebooks:
        pages[f"reference/{profile}/{nb}/"] = pages[f"notebooks/{nb}.py"] = f"notebooks/{nb}.ipynb"
    for f in (REPO / "docs" / "figures").glob("*"):
        pages[f"docs/figures/{f.name}"] = f"docs/figures/{f.name}"

    figures = {}
    for nb in notebooks:
        text = (reference / nb / f"{nb}.ipynb").read_text()
        if re.search(r"\$\$|\\\(|\\\[", text):  # the hook drops MathJax, which TeX would need
            raise ValueError(f"{reference / nb / nb}.ipynb holds TeX; the site drops MathJax (site_hooks.py)")
        notebook = json.loads(text)
        # the progress bars' widget state would make every page load the widget manager from a CDN; without it the
        # bars show their text form
        notebook.get("metadata", {}).pop("widgets", None)
        (stage / "notebooks" / f"{nb}.ipynb").write_text(json.dumps(notebook, indent=1))
        pngs = sorted((reference / nb).glob("*.png"), key=lambda p: ("verdicts" not in p.stem, p.name))
        if pngs:
            (stage / "figures" / nb).mkdir(parents=True, exist_ok=True)
            shutil.copy2(pngs[0], stage / "figures" / nb / pngs[0].name)
            figures[nb] = f"figures/{nb}/{pngs[0].name}"
    (stage / "docs").mkdir()
    shutil.copytree(REPO / "docs" / "figures", stage / "docs" / "figures")
    for d in docs:
        (stage / "docs" / d).write_text(rewrite_links((REPO / "docs" / d).read_text(), f"docs/{d}", pages))
    (stage / "index.md").write_text(rewrite_links((REPO / "README.md").read_text(), "README.md", pages))
    (stage / "claims.md").write_text(claims_index(reference, figures))
    (stage / "js").mkdir()
    (stage / "js" / "claims.js").write_text(_CLAIMS_JS)
    (stage / "css").mkdir()
    (stage / "css" / "site.css").write_text(_CSS)
    (build / "site_hooks.py").write_text(_HOOKS)
    config = build / "mkdocs.yml"
    config.write_text(_mkdocs_yml(notebooks, docs, build / ".cache" / "mkdocs-jupyter"))
    return config


def build_site(profile: str = "cpu", *, build: Path = BUILD) -> Path:
    """Stage and build the site (``mkdocs build --strict``: a broken link or anchor is an error); returns
    ``<build>/site``. A page that loads anything from another host is an error naming it."""
    config = stage_site(profile, build=build)
    shutil.rmtree(build / "site", ignore_errors=True)
    subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-f", str(config)], check=True,
                   env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    site = build / "site"
    external = [f"{p.relative_to(site)}: {m.group(0)[:120]}" for p in site.rglob("*.html")
                for m in _EXTERNAL.finditer(p.read_text(errors="replace"))]
    if external:
        raise RuntimeError("the site loads resources from the network:\n  " + "\n  ".join(external[:20]))
    return site


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="cpu", help="whose reference results (default cpu)")
    args = parser.parse_args(argv)
    site = build_site(args.profile)
    print(f"[site] {site}: {sum(1 for _ in site.rglob('*.html'))} pages; open {site / 'index.html'}, or serve it: "
          f"python -m http.server -d {site.relative_to(REPO) if site.is_relative_to(REPO) else site}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
