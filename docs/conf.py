"""Sphinx configuration of the scalegp documentation site.

Build (from the repository root; the README's docs command):
``sphinx-build -W --keep-going -n -b html docs docs/_build/html``.

Why Sphinx rather than MkDocs: the docstrings are numpydoc, which numpydoc renders as they are
written (MkDocs' mkdocstrings reads them too, but through a second parser with its own rules);
autosummary generates one page per public module recursively, so a name added later appears
without editing a page; sphinx-gallery runs the examples at build time and renders their
figures; myst-parser reads the markdown notes of ``docs/`` unchanged as the theory part; and
``-n`` (nitpicky) turns every unresolved cross-reference into a warning, which ``-W`` makes an
error. These are the tools of scikit-learn, GPyTorch and GPflow's documentation.

``-D plot_gallery=0`` (sphinx-gallery's switch) builds the gallery pages without running the
examples (no figures, no output): a quick check of everything else. ``-D
sphinx_gallery_conf.filename_pattern=...`` does not work from the command line; set
``SCALEGP_DOCS_EXAMPLES`` to a regular expression to run only the matching examples.
"""

import os
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))        # the checkout's package, also without an install

import scalegp  # noqa: E402

project = "scalegp"
author = "the scalegp authors"
copyright = "2026, the scalegp authors"
release = scalegp.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "myst_parser",
]

extensions.append("sphinx_gallery.gen_gallery")

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
templates_path = ["_templates"]
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]

# Every reference must resolve (-n on the command line, and here for builds without it).
nitpicky = True
# The signatures carry no annotations: the docstrings give the types in words, and names such
# as numpy.typing.ArrayLike would need intersphinx (network access at build time) to resolve.
autodoc_typehints = "none"
autodoc_default_options = {"members": True, "show-inheritance": True}
autosummary_generate = True
autosummary_ignore_module_all = True         # each name on the page of the module defining it
autosummary_imported_members = False

numpydoc_show_class_members = False          # the autosummary template lists the members
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False             # types are words ("array of shape (n, d)")
numpydoc_validation_checks = set()

myst_enable_extensions = []             # the notes write formulas in plain text; "$" is a literal
myst_heading_anchors = 3

html_theme = "pydata_sphinx_theme"
html_title = f"scalegp {release}"
html_theme_options = {
    "navigation_depth": 2,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
}
# Pages without sub-pages have no section navigation: no empty left sidebar for them.
html_sidebars = {"index": [], "getting-started": [], "choosing": []}
# Layout fixes for what the screenshots showed (clipped long titles, code in tables).
html_static_path = ["_static"]
html_css_files = ["scalegp.css"]

sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": os.environ.get("SCALEGP_DOCS_EXAMPLES", r"/plot_"),
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
    "image_scrapers": ("matplotlib",),
    "matplotlib_animations": False,
    "abort_on_example_error": False,       # report every failing example, then fail (-W)
    "only_warn_on_example_error": False,
    "reset_modules": ("matplotlib",),
}

# matplotlib draws off screen while the examples run.
os.environ.setdefault("MPLBACKEND", "Agg")
# The UCI example reads the local copy next to the repository where there is one (as the
# tests do); elsewhere fetch_uci downloads the file once into its cache, checked by SHA-256.
if "SCALEGP_UCI_DIR" not in os.environ and (ROOT.parent / "shared" / "data" / "uci").is_dir():
    os.environ["SCALEGP_UCI_DIR"] = str(ROOT.parent / "shared" / "data" / "uci")
warnings.filterwarnings("ignore", message="Matplotlib is currently using agg")


# A warning an example draws is shown on its page as a user sees it on the command line,
# "CATEGORY: message", without the build machine's file path and source line.
def _format_warning(message, category, filename, lineno, line=None):
    return f"{category.__name__}: {message}\n"


warnings.formatwarning = _format_warning


# -- Plain-text formulas in docstrings ------------------------------------------------------
# The docstrings write formulas in plain text (docs/README.md): |det M|, |x - c|, and name
# fitted attributes as scikit-learn does (kernel_). In reStructuredText "|...|" is a
# substitution and "word_" a link; outside inline literals and directives, "|" and a word's
# trailing "_" are escaped here so that they render as written. Nothing else is changed.
import re  # noqa: E402

_LITERAL = re.compile(r"(``.+?``|`[^`]+`_?)")


_TRAILING_UNDERSCORE = re.compile(r"(?<=\w)_(?=\W|$)")


def _escape_plain(part: str) -> str:
    return _TRAILING_UNDERSCORE.sub(r"\\_", part.replace("|", r"\|"))


def _escape_bars(line: str) -> str:
    stripped = line.strip()
    if stripped.startswith(("+", "|")) and stripped.endswith(("+", "|")):
        return line                             # a grid table or a line block: leave it alone
    if stripped.startswith(".."):
        return line                             # a directive (numpydoc's own output included)
    parts = _LITERAL.split(line)
    return "".join(part if i % 2 else _escape_plain(part) for i, part in enumerate(parts))


def _plain_text_formulas(app, what, name, obj, options, lines):
    if what in ("data", "attribute") and obj is not None and lines:
        own = getattr(type(obj), "__doc__", None)
        own = own if isinstance(own, str) else None
        if own and "\n".join(lines).strip() == " ".join(own.split()).strip() or (
                own and lines[0].strip() == own.strip().splitlines()[0].strip()):
            lines[:] = []                       # the docstring of its type (tuple, dict): none
            return
    out, literal_indent = [], None                 # inside a literal block ("::"): as is
    for line in lines:
        indent = len(line) - len(line.lstrip())
        if literal_indent is not None and line.strip() and indent <= literal_indent:
            literal_indent = None
        out.append(line if literal_indent is not None else _escape_bars(line))
        if literal_indent is None and line.rstrip().endswith("::"):
            literal_indent = indent
    lines[:] = out


# -- Members inherited from other packages ---------------------------------------------------
# A scalegp class documents what scalegp defines, also in its own base classes; what it
# inherits from scikit-learn or the standard library (get_params, set_output, args, ...) is
# documented there and its docstrings refer to that project's own pages.
def _skip_foreign_members(app, what, name, obj, skip, options):
    if skip or what not in ("class", "exception"):
        return None
    module = getattr(obj, "__module__", None) or ""
    if hasattr(obj, "__func__"):
        module = getattr(obj.__func__, "__module__", module) or module
    if isinstance(obj, property) and obj.fget is not None:
        module = obj.fget.__module__ or ""
    if module and not module.startswith("scalegp"):
        return True
    return None


# -- References ------------------------------------------------------------------------------
# Names re-exported by a package (scalegp.LowRankGPRegressor) are documented once, on the page
# of the module defining them (scalegp.estimators.lowrank.LowRankGPRegressor); a reference
# through the package resolves there. Anything else unresolved stays a warning (nitpicky).
def _lookup(dotted: str):
    """The object a dotted name names (a module, then attributes), or raise LookupError."""
    import importlib
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            raise LookupError(dotted) from None
        return obj, ".".join(parts[:cut]), parts[cut:]
    raise LookupError(dotted)


def _home_of(target: str):
    """The documented full name of the object ``target`` names through a re-export
    (scalegp.kernels.Kernel.theta -> scalegp.kernels.base.Kernel.theta), or None."""
    import inspect
    try:
        _, module_name, attrs = _lookup(target)
    except LookupError:
        return None
    import importlib
    obj, name = importlib.import_module(module_name), module_name
    for attr in attrs:
        obj = getattr(obj, attr)
        home = getattr(obj, "__module__", None)
        qualname = getattr(obj, "__qualname__", None)
        if (inspect.isclass(obj) or inspect.isfunction(obj)) and home and qualname:
            name = f"{home}.{qualname}"              # a class or function: where it is defined
        else:
            name = f"{name}.{attr}"                  # a member of what came before
    return name


def _resolve_reexports(app, env, node, contnode):
    if node.get("refdomain") != "py":
        return None
    target = node.get("reftarget", "")
    domain = env.get_domain("py")

    def resolve(name):
        return domain.resolve_xref(env, node.get("refdoc"), app.builder, node["reftype"],
                                   name, node, contnode)

    if target.startswith("scalegp."):
        candidates = [target]
    else:
        # a name relative to the module or class the reference is written in
        module, cls = node.get("py:module"), node.get("py:class")
        candidates = [f"{module}.{cls}.{target}"] if module and cls else []
        candidates += [f"{module}.{target}"] if module else []
        # a generated page is named after its object (the class of a methods table)
        page = (node.get("refdoc") or "").rsplit("/", 1)[-1]
        candidates += [f"{page}.{target}"] if page.startswith("scalegp.") else []
        # a short name (verdicts.SEED_RULE) written elsewhere: one documented object ends with it
        matches = domain.find_obj(env, None, None, target, None, 1)
        if len(matches) == 1:
            return resolve(matches[0][0])
    for candidate in candidates:
        home = _home_of(candidate)
        if home is None:
            continue                                 # no such object: try the next reading
        ref = resolve(home)
        if ref is not None:
            return ref
        # The object exists but has no page of its own (a special method such as __call__,
        # a constant without a doc comment): shown as code, as any name without a link.
        return contnode
    return None


# Other projects' names (numpy, scipy, scikit-learn, the standard library) cannot resolve
# without intersphinx, which downloads their inventories at build time; the build stays
# offline, so they render as code. Private names are not part of the reference either.
nitpick_ignore_regex = [
    (r"py:.*", r"(numpy|np|scipy|sklearn|dask|distributed|matplotlib|pyarrow|threadpoolctl)"
               r"(\..*)?"),
    (r"py:.*", r"(abc|typing|collections|dataclasses|enum|pathlib|os|io|numbers|warnings|"
               r"concurrent|contextlib|argparse|builtins)(\..*)?"),
    (r"py:.*", r"(Exception|ValueError|RuntimeError|TypeError|UserWarning|Warning|"
               r"RuntimeWarning|FileNotFoundError|OSError|NotImplementedError|object|str|int|"
               r"float|bool|dict|list|tuple|Path|callable|None|Iterator|Iterable|Sequence|"
               r"Mapping|ArrayLike|NDArray)"),
    (r"py:.*", r"(.*\.)?_[A-Za-z0-9].*"),      # private names
]


# -- The top-level names ---------------------------------------------------------------------
# scalegp re-exports the names most users need (scalegp.__all__); the API page lists them with
# links to their documentation, from __all__ at build time, so a name added there appears.
def _write_top_level_names(app):
    import importlib
    lines = []
    for name in scalegp.__all__:
        obj = getattr(scalegp, name)
        if isinstance(obj, type(scalegp)):
            lines.append(f"   * - :mod:`{obj.__name__}`\n     - {_first_line(obj)}")
        elif hasattr(obj, "__module__") and hasattr(obj, "__qualname__"):
            home = importlib.import_module(obj.__module__)
            kind = "exc" if isinstance(obj, type) and issubclass(obj, BaseException) else (
                "class" if isinstance(obj, type) else "func")
            lines.append(f"   * - :{kind}:`scalegp.{name} <{home.__name__}.{obj.__qualname__}>`"
                         f"\n     - {_first_line(obj)}")
        else:
            lines.append(f"   * - ``scalegp.{name}``\n     - ``{obj!r}``")
    table = (".. list-table::\n   :header-rows: 1\n   :widths: 35 65\n\n"
             "   * - name\n     - what it is\n" + "\n".join(lines) + "\n")
    target = Path(app.srcdir) / "generated" / "top_level_names.inc"
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.is_file() or target.read_text(encoding="utf-8") != table:
        target.write_text(table, encoding="utf-8")


def _first_line(obj) -> str:
    doc = (getattr(obj, "__doc__", None) or "").strip().split("\n\n")[0]
    text = " ".join(doc.split())
    sentence = text.split(". ")[0].rstrip(".")
    return _escape_bars(sentence) + "." if sentence else ""


def setup(app):
    app.connect("builder-inited", _write_top_level_names)
    app.connect("autodoc-process-docstring", _plain_text_formulas, priority=600)  # after numpydoc
    app.connect("autodoc-skip-member", _skip_foreign_members)
    app.connect("missing-reference", _resolve_reexports)
