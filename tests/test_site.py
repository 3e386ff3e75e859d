"""The results site (``make site``) in a real browser: Debian's headless Chromium driven by Selenium.

The site is built from ``reference/cpu/`` into a temporary folder and served on localhost. The browser checks that
the claims index lists every row of every reference ``claims.csv`` and that its filter works, that every notebook
page shows the figures its executed notebook holds (each image loaded, natural width > 0), that no link of any page
is broken (its target served, its anchor present), and that no page logs a console error. The browser comes from
Debian's packages (``chromium``, ``chromium-driver``; ``.ci/run`` installs them); nothing is downloaded at run time.
"""

import functools
import http.server
import json
import shutil
import threading
import urllib.parse
import urllib.request
from pathlib import Path

import pandas as pd
import pytest

from dgro_lib.report.claims import read_claims
from dgro_lib.cli.site import build_site
from dgro_lib.util.paths import REPO

REFERENCE = REPO / "reference" / "cpu"
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
# the flags a closed network needs: without the background-networking ones Chromium keeps dialling Google's hosts
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-dev-shm-usage",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--window-size=1400,1000"]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = build_site("cpu", build=tmp_path_factory.mktemp("build"))
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield root, f"http://127.0.0.1:{server.server_port}/"
    server.shutdown()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not shutil.which(p)]
    if missing:
        pytest.fail(f"{', '.join(missing)} not found: the browser test needs Debian's chromium and chromium-driver "
                    "(apt-get install chromium chromium-driver; .ci/run installs them)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS + [f"--user-data-dir={tmp_path_factory.mktemp('chromium')}"]:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    yield driver
    driver.quit()


def _open(driver, url: str) -> list[str]:
    """Load ``url``; returns the console errors it logged."""
    driver.get(url)
    driver.execute_script("return document.readyState")
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def _reference_rows() -> pd.DataFrame:
    frames = [read_claims(p).assign(notebook=p.parent.name) for p in sorted(REFERENCE.glob("*/claims.csv"))]
    return pd.concat(frames, ignore_index=True)


def test_the_claims_index_lists_every_claim_and_filters(site, browser):
    root, url = site
    assert _open(browser, url + "claims.html") == []
    shown = browser.execute_script(
        "return Array.from(document.querySelectorAll('#claims tbody tr')).map("
        "r => [r.dataset.notebook, r.cells[2].textContent, r.dataset.verdict])")
    expected = _reference_rows()
    assert len(shown) == len(expected)
    listed = {(nb, claim) for nb, claim, _ in shown}
    for r in expected.itertuples():
        name = str(r.claim) + (" (project check)" if r.source == "project" else "")
        assert (r.notebook, name) in listed, f"{r.notebook}: {name!r} missing from the claims index"

    from selenium.webdriver.support.ui import Select

    Select(browser.find_element("css selector", "select[data-filter=verdict]")).select_by_value("contradicted")
    visible = browser.execute_script(
        "return Array.from(document.querySelectorAll('#claims tbody tr')).filter(r => r.style.display !== 'none')"
        ".map(r => r.dataset.verdict)")
    assert visible and set(visible) == {"contradicted"}
    assert len(visible) == int((expected["verdict"] == "contradicted").sum())


@pytest.mark.parametrize("notebook", sorted(p.parent.name for p in REFERENCE.glob("*/*.ipynb")))
def test_every_notebook_page_shows_its_figures(site, browser, notebook):
    root, url = site
    cells = json.loads((REFERENCE / notebook / f"{notebook}.ipynb").read_text())["cells"]
    figures = sum("image/png" in o.get("data", {}) for c in cells for o in c.get("outputs", []))
    assert _open(browser, url + f"notebooks/{notebook}.html") == []
    images = browser.execute_script(
        "return Array.from(document.querySelectorAll('.jupyter-wrapper img')).map(i => [i.complete, i.naturalWidth])")
    assert len(images) == figures > 0
    assert all(complete and width > 0 for complete, width in images), images


def test_no_page_has_a_broken_link_or_a_console_error(site, browser):
    root, url = site
    base = urllib.parse.urlsplit(url).path
    pages = sorted(str(p.relative_to(root)) for p in root.rglob("*.html"))
    ids, errors, links = {}, {}, []
    for page in pages:
        logged = _open(browser, url + page)
        if logged:
            errors[page] = logged
        ids[page] = set(browser.execute_script("return Array.from(document.querySelectorAll('[id]')).map(e => e.id)"))
        links += [(page, href) for href in browser.execute_script("return Array.from(document.links).map(a => a.href)")
                  if href.startswith(url)]  # an external link (arXiv, a home page) is not fetched on a closed network
    broken = []
    for page, href in sorted(set(links)):
        target = urllib.parse.urlsplit(href)
        path = urllib.parse.unquote(target.path[len(base):]) or "index.html"
        if path.endswith("/"):
            path += "index.html"
        try:
            urllib.request.urlopen(url + urllib.parse.quote(path), timeout=10).close()
        except Exception as e:  # noqa: BLE001 - every failure is a broken link, named below
            broken.append(f"{page} -> {href}: {e}")
            continue
        fragment = urllib.parse.unquote(target.fragment)
        if fragment and path in ids and fragment not in ids[path]:
            broken.append(f"{page} -> {path}#{fragment}: no such anchor")
    assert not errors, errors
    assert not broken, "\n".join(broken[:30])
