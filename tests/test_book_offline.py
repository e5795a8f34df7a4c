"""The book reads offline: no script, stylesheet or font is fetched from the network.

Two parts:

* the configuration, statically (fast, no build): what `_config.yml` hands to Sphinx, as
  jupyter-book computes it;
* the built site, when `_build/html` exists (after `make book`; skipped otherwise): every
  page is scanned for remote `<script src>`, stylesheet/preload `<link href>`, remote
  `@import`/`url()` in styles, and local assets that do not exist; pages with math must load
  the local MathJax.

Links (`<a href="https://...">`, launch buttons) are fine: they are followed on a click, not
loaded when the page is viewed. Images are not checked (the instructors' Colab badges are
remote images; offline they show their alt text inside the link).
"""
from __future__ import annotations

import importlib.util
import json
import pathlib
import re
from html.parser import HTMLParser
from urllib.parse import unquote, urlsplit

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
HTML = ROOT / "_build" / "html"
MATHJAX_EXTENSION = "sphinx-mathjax-offline"

REMOTE = re.compile(r"^\s*(?:https?:)?//", re.IGNORECASE)
# remote resources inside CSS: url(http://..), url('//..'), @import "http://.."
CSS_REMOTE = re.compile(
    r"""url\(\s*['"]?\s*(?:https?:)?//|@import\s+(?:url\()?\s*['"]?\s*(?:https?:)?//""",
    re.IGNORECASE,
)
# <link rel=...> values that make the browser fetch the target while the page is viewed
FETCHED_LINK_RELS = {"stylesheet", "preload", "modulepreload", "icon", "shortcut", "manifest"}


# --------------------------------------------------------------------------- configuration


@pytest.fixture(scope="module")
def sphinx_config():
    """The Sphinx configuration jupyter-book builds from _config.yml."""
    jb_config = pytest.importorskip("jupyter_book.config")
    config, _ = jb_config.get_final_config(
        user_yaml=ROOT / "_config.yml",
        cli_config={"latex_individualpages": False},
        sourcedir=ROOT,
        raise_on_invalid=True,
    )
    return config


def test_mathjax_is_served_from_the_site(sphinx_config):
    assert MATHJAX_EXTENSION in sphinx_config["extensions"], (
        f"{MATHJAX_EXTENSION} must be in sphinx.extra_extensions; "
        f"got {sphinx_config['extensions']}")
    path = sphinx_config.get("mathjax_path")
    assert path and not REMOTE.match(path), f"mathjax_path must be local; got {path!r}"
    spec = importlib.util.find_spec(MATHJAX_EXTENSION)
    assert spec is not None, f"{MATHJAX_EXTENSION} is not installed (pip install -e '.[book]')"
    static = pathlib.Path(spec.origin).parent / "static"
    # the extension copies static/mathjax to _static/mathjax; mathjax_path points inside it
    assert (static / path).is_file(), f"{path} is not in {MATHJAX_EXTENSION}'s copy of MathJax"
    fonts = list((static / "mathjax" / "output" / "chtml" / "fonts" / "woff-v2").glob("*.woff"))
    assert fonts, "MathJax's CHTML fonts are missing from the local copy"


def test_no_widget_manager_from_a_cdn(sphinx_config):
    # myst-nb adds these scripts (require.js, @jupyter-widgets/html-manager) to every page
    # whose notebook carries widget state; the book's widget cells are remove-output.
    scripts = sphinx_config.get("nb_ipywidgets_js", None)
    assert scripts is not None, "set nb_ipywidgets_js: {} (myst-nb's default loads CDN scripts)"
    remote = [url for url in scripts if REMOTE.match(url)]
    assert not remote, f"nb_ipywidgets_js loads from the network: {remote}"


def test_static_assets_are_local(sphinx_config):
    for key in ("html_js_files", "html_css_files"):
        for entry in sphinx_config.get(key) or []:
            name = entry[0] if isinstance(entry, (tuple, list)) else entry
            assert not REMOTE.match(name), f"{key} loads {name} from the network"
    static_dirs = [ROOT / p for p in sphinx_config.get("html_static_path") or []]
    for directory in static_dirs:
        assert directory.is_dir(), f"html_static_path entry {directory} does not exist"
    for css in sphinx_config.get("html_css_files") or []:
        name = css[0] if isinstance(css, (tuple, list)) else css
        found = [d / name for d in static_dirs if (d / name).is_file()]
        assert found, f"{name} (html_css_files) is in none of {static_dirs}"
        text = found[0].read_text()
        assert not CSS_REMOTE.search(text), f"{found[0]} fetches from the network"


def test_no_comment_or_analytics_scripts(sphinx_config):
    comments = sphinx_config.get("comments_config") or {}
    enabled = [k for k, v in comments.items() if v]
    assert not enabled, f"comment widgets load remote scripts: {enabled}"
    analytics = (sphinx_config.get("html_theme_options") or {}).get("analytics") or {}
    # (plausible_analytics_url has a default; the script is added only with a domain)
    on = {k: v for k, v in analytics.items()
          if k in ("google_analytics_id", "plausible_analytics_domain") and v}
    assert not on, f"analytics load remote scripts: {on}"


def test_execution_is_cached_under_build_and_fails_on_errors(sphinx_config):
    assert sphinx_config["nb_execution_mode"] == "cache"
    # empty -> myst-nb puts the cache beside the html output: _build/.jupyter_cache,
    # which `make clean` (rm -rf _build) removes
    cache = sphinx_config.get("nb_execution_cache_path", "")
    assert cache == "" or pathlib.PurePosixPath(cache).parts[:1] == ("_build",), cache
    assert sphinx_config["nb_execution_allow_errors"] is False
    # a failing notebook stops the build, and is run again by the next one (a warning alone
    # would let an incremental rebuild pass: the failed notebook is not re-read)
    assert sphinx_config["nb_execution_raise_on_error"] is True
    assert 60 <= sphinx_config["nb_execution_timeout"] <= 3600


# --------------------------------------------------------------------------- built site


class _Assets(HTMLParser):
    """Collect what a page loads when it is viewed."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.loaded: list[tuple[str, str]] = []  # (what, url)
        self.inline_css: list[str] = []
        self.widget_views: list[str] = []  # model ids of widget outputs shown in the page
        self.widget_state: dict = {}  # model id -> saved model, from the page's widget state
        self._in_style = False
        self._script_type: str | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "script":
            if a.get("src"):
                self.loaded.append(("script", a["src"]))
            self._script_type = a.get("type")
        elif tag == "link":
            rels = set((a.get("rel") or "").lower().split())
            if rels & FETCHED_LINK_RELS and a.get("href"):
                self.loaded.append((f"link rel={a.get('rel')}", a["href"]))
        elif tag == "iframe" and a.get("src"):
            self.loaded.append(("iframe", a["src"]))
        elif tag == "style":
            self._in_style = True
        style = a.get("style")
        if style:
            self.inline_css.append(style)

    def handle_endtag(self, tag):
        if tag == "style":
            self._in_style = False
        elif tag == "script":
            self._script_type = None

    def handle_data(self, data):
        if self._in_style:
            self.inline_css.append(data)
        elif self._script_type == "application/vnd.jupyter.widget-view+json":
            self.widget_views.append(json.loads(data).get("model_id", ""))
        elif self._script_type == "application/vnd.jupyter.widget-state+json":
            self.widget_state.update(json.loads(data).get("state", {}))


def _pages():
    """The site's pages (not the theme's Jinja macro files copied into _static)."""
    skip = {"_static", "_sources", "_images"}
    return sorted(p for p in HTML.rglob("*.html") if not skip & set(p.relative_to(HTML).parts))


needs_build = pytest.mark.skipif(
    not HTML.is_dir(), reason="no _build/html (run `make book` to check the built site)")


def _parse(page: pathlib.Path) -> _Assets:
    parser = _Assets()
    parser.feed(page.read_text(encoding="utf-8", errors="replace"))
    return parser


@needs_build
def test_built_pages_load_nothing_from_the_network():
    remote = []
    for page in _pages():
        parsed = _parse(page)
        rel = page.relative_to(HTML)
        remote += [f"{rel}: <{what}> {url}" for what, url in parsed.loaded if REMOTE.match(url)]
        remote += [f"{rel}: <style> {m.group(0)}..." for css in parsed.inline_css
                   for m in CSS_REMOTE.finditer(css)]
    assert not remote, "pages fetch from the network:\n" + "\n".join(sorted(remote)[:50])


@needs_build
def test_built_stylesheets_fetch_nothing_from_the_network():
    remote = []
    for css in sorted((HTML / "_static").rglob("*.css")):
        for m in CSS_REMOTE.finditer(css.read_text(encoding="utf-8", errors="replace")):
            remote.append(f"{css.relative_to(HTML)}: {m.group(0)}...")
    assert not remote, "stylesheets fetch from the network:\n" + "\n".join(remote[:50])


@needs_build
def test_built_local_assets_exist():
    missing = []
    for page in _pages():
        for what, url in _parse(page).loaded:
            if REMOTE.match(url) or url.startswith(("data:", "#")):
                continue
            target = (page.parent / unquote(urlsplit(url).path)).resolve()
            if not target.is_file():
                missing.append(f"{page.relative_to(HTML)}: <{what}> {url}")
    assert not missing, "assets missing from the site:\n" + "\n".join(sorted(set(missing))[:50])


@needs_build
def test_built_pages_with_math_load_the_local_mathjax():
    wrong = []
    for page in _pages():
        text = page.read_text(encoding="utf-8", errors="replace")
        if 'class="math' not in text:
            continue
        scripts = [url for what, url in _parse(page).loaded if what == "script"]
        if not any(urlsplit(u).path.endswith("_static/mathjax/tex-chtml.js") for u in scripts):
            wrong.append(f"{page.relative_to(HTML)}: {[u for u in scripts if 'mathjax' in u]}")
    assert not wrong, "pages with math but no local MathJax:\n" + "\n".join(wrong[:50])


# widget models that only display (layout, text, progress bars): a view made of these alone
# is a tqdm.auto progress bar, not something a reader interacts with
_PASSIVE_WIDGETS = re.compile(r"^(H|V)?Box|Layout|Style|^HTML|^Label|Progress")


def _interactive_models(model_id: str, state: dict, seen: set | None = None) -> list[str]:
    """Model names of the non-passive widgets in the tree under model_id."""
    seen = set() if seen is None else seen
    if model_id in seen or model_id not in state:
        return []
    seen.add(model_id)
    model = state[model_id]
    found = [] if _PASSIVE_WIDGETS.search(model.get("model_name", "")) else [model["model_name"]]
    for child in re.findall(r"IPY_MODEL_([0-9a-f]+)", json.dumps(model.get("state", {}))):
        found += _interactive_models(child, state, seen)
    return found


@needs_build
def test_built_pages_show_no_interactive_widgets():
    # With nb_ipywidgets_js = {} there is no widget manager, so a widget output (a slider of
    # ipywidgets.interact) renders as nothing: widget cells must be tagged remove-output
    # (CONTRIBUTING.md), with a static figure beside them. Progress bars (tqdm.auto in a
    # Monte Carlo run) are allowed: they vanish, which is what a reader wants.
    lost = []
    for page in _pages():
        parsed = _parse(page)
        for view in parsed.widget_views:
            models = _interactive_models(view, parsed.widget_state)
            if models:
                lost.append(f"{page.relative_to(HTML)}: a widget output with {sorted(set(models))}")
    assert not lost, "widget outputs shown without a widget manager (tag them remove-output):\n" + (
        "\n".join(lost))
