"""Sphinx configuration of the OmniCCL documentation.

Build with scripts/build-docs.sh OUT (CI) or
`sphinx-build -W --keep-going -b html docs OUT` with docs/requirements.txt
installed. Before reading the pages, this file runs the generators in
docs/tools: the C API reference from omniccl.h, the settings tables from
core/common/settings.cc, and the performance plots and tables from the CSVs
in bench/results/latest. A generator that fails stops the build.
"""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
GEN = os.path.join(HERE, "reference", "generated")
PLOTS = os.path.join(HERE, "performance", "generated")
LATEST_CPU = os.path.join(ROOT, "bench", "results", "latest", "cpu-2core-kvm", "20261129T0142Z")


def _run(*args):
    subprocess.run([sys.executable, *args], check=True)


os.makedirs(GEN, exist_ok=True)
_run(os.path.join(HERE, "tools", "gen_c_api.py"), os.path.join(ROOT, "capi", "include", "omniccl", "omniccl.h"),
     os.path.join(ROOT, "capi", "abi", "symbols.txt"), os.path.join(GEN, "c_api.rst"))
_run(os.path.join(HERE, "tools", "gen_settings.py"), os.path.join(ROOT, "core", "common", "settings.cc"),
     os.path.join(HERE, "reference", "settings.md"), os.path.join(GEN, "settings_omniccl.md"),
     os.path.join(GEN, "settings_launcher.md"))
_run(os.path.join(HERE, "tools", "plot_results.py"), LATEST_CPU, PLOTS)
_run(os.path.join(HERE, "tools", "plot_gpu.py"), os.path.join(ROOT, "bench", "results", "latest", "gpu-h200"), PLOTS)

# The Python package is imported from the checkout; its native module
# (omniccl._omniccl, built by pip) is mocked when it is not importable.
sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))

project = "OmniCCL"
author = "The OmniCCL authors"
copyright = "2026, The OmniCCL authors"
release = "0.3.0"
version = "0.3"

extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.napoleon"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 4
exclude_patterns = ["_build", "reference/generated/*", "performance/generated/*.md", "tools", "requirements.txt"]

# Ray (for omniccl.ray) is mocked too: the docs environment does not install it.
autodoc_mock_imports = ["omniccl._omniccl", "ray"]
autodoc_member_order = "bysource"
autodoc_typehints = "none"

# C declarations name types from dlpack.h and the C library; they need no targets.
nitpicky = False

html_theme = "alabaster"
html_title = "OmniCCL 0.3.0"
# Wide enough for the performance plots (13 inches at 90 dpi).
html_theme_options = {"page_width": "1240px", "sidebar_width": "240px"}
html_static_path = []
# No network in CI: linkcheck is never part of the build (run it by hand:
# sphinx-build -b linkcheck docs OUT).
linkcheck_ignore = [r".*"]
