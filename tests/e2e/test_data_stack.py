"""The data stack of the default image (issue 24, item 3; docs/PROFILES.md "The data stack"):
what E2B's code-interpreter image offers that Debian packages (scripts/deps.sh installs it), used
for real through a daemon, not only imported.

`default` (any import, no policy) imports every library and does one small real thing with each;
`data-science` (restricted policy, import allow-list) does the analysis ones under its policy,
where the import guard must let each library import its own dependencies, and refuses the
plotting and networking ones with its usual message; `visualization` adds seaborn and plotly.
One session per profile, few cells with several libraries each: the file stays quick."""
import base64
import importlib.util
import json

import pytest

from airlock_daemon import daemon_fixture

daemon = daemon_fixture(pytest)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

# Top-level module -> Debian package (scripts/deps.sh).
STACK = {
    "seaborn": "python3-seaborn", "sklearn": "python3-sklearn",
    "statsmodels": "python3-statsmodels", "plotly": "python3-plotly",
    "openpyxl": "python3-openpyxl", "xlrd": "python3-xlrd", "bs4": "python3-bs4",
    "lxml": "python3-lxml", "requests": "python3-requests", "sympy": "python3-sympy",
    "networkx": "python3-networkx", "tabulate": "python3-tabulate", "tqdm": "python3-tqdm",
    "docx": "python3-docx", "pypdf": "python3-pypdf", "reportlab": "python3-reportlab",
    "skimage": "python3-skimage", "xarray": "python3-xarray", "nltk": "python3-nltk",
    "PIL": "python3-pil", "IPython": "python3-ipython",
}

# What data-science's allow-list adds for analysis (profiles/data-science.json); visualization
# has these too, plus matplotlib, seaborn and plotly.
ANALYSIS = ["sklearn", "statsmodels", "sympy", "networkx", "xarray", "skimage", "PIL", "nltk",
            "openpyxl", "xlrd", "docx", "pypdf", "reportlab", "bs4", "lxml", "tabulate", "tqdm"]

# Each cell prints one JSON object; written in what the restricted policy allows (no getattr,
# no underscore-prefixed attributes, no os or sys), so both profiles run the same code.
ANALYSIS_CELL = r'''
import json
import numpy as np
from sklearn.linear_model import LinearRegression
import statsmodels.api as sm
import sympy
import networkx as nx
import xarray as xr
from skimage import filters
from nltk.tokenize import wordpunct_tokenize, TreebankWordTokenizer
from tabulate import tabulate
from tqdm import tqdm

X = np.arange(10.0).reshape(-1, 1)
model = LinearRegression().fit(X, 2 * X.ravel() + 1)
x = np.arange(20.0)
ols = sm.OLS(3 * x + 2, sm.add_constant(x)).fit()
s = sympy.symbols("s")
G = nx.cycle_graph(6)
img = np.zeros((16, 16))
img[4:12, 4:12] = 1.0
print(json.dumps({
    "sklearn": [round(float(model.coef_[0]), 6), round(float(model.intercept_), 6),
                round(float(model.predict([[20.0]])[0]), 6)],
    "statsmodels": [round(float(v), 6) for v in ols.params],
    "sympy": sorted(int(r) for r in sympy.solve(s**2 - 4, s)),
    "networkx": nx.shortest_path(G, 0, 4),
    "xarray": float(xr.DataArray(np.ones((2, 3)), dims=("a", "b")).sum()),
    "skimage": [bool(filters.sobel(img).max() > 0), float(filters.threshold_otsu(img))],
    "nltk": [wordpunct_tokenize("Hello, world!"), TreebankWordTokenizer().tokenize("Don't.")],
    "tabulate": tabulate([[1, 2]], headers=["a", "b"]),
    "tqdm": sum(tqdm(range(5), disable=True)),
}))
'''

DOCUMENTS_CELL = r'''
import json
import openpyxl
import pandas as pd
import xlrd
import docx
from reportlab.pdfgen import canvas
from pypdf import PdfReader
from bs4 import BeautifulSoup
from lxml import etree
from PIL import Image

wb = openpyxl.Workbook()
wb.active.append(["name", "n"])
wb.active.append(["a", 2])
wb.save("/work/stack.xlsx")
rows = [list(r) for r in openpyxl.load_workbook("/work/stack.xlsx").active.values]

d = docx.Document()
d.add_paragraph("Hello from docx")
d.save("/work/stack.docx")

c = canvas.Canvas("/work/stack.pdf")
c.drawString(72, 720, "Hello from reportlab")
c.save()

im = Image.new("RGB", (8, 8), (255, 0, 0))
im.save("/work/stack.png")
print(json.dumps({
    "openpyxl": rows,
    "pandas_excel": int(pd.read_excel("/work/stack.xlsx")["n"].sum()),
    "xlrd": xlrd.__version__,
    "docx": [p.text for p in docx.Document("/work/stack.docx").paragraphs],
    "pdf": PdfReader("/work/stack.pdf").pages[0].extract_text().strip(),
    "bs4": BeautifulSoup("<p><a href='/x'>hi</a></p>", "lxml").a["href"],
    "lxml": etree.fromstring("<r><i>7</i></r>").findtext("i"),
    "pil": list(Image.open("/work/stack.png").getpixel((0, 0))),
}))
'''


def _check_analysis(out):
    assert out["sklearn"] == [2.0, 1.0, 41.0]
    assert out["statsmodels"] == [2.0, 3.0]
    assert out["sympy"] == [-2, 2]
    assert out["networkx"] == [0, 5, 4]
    assert out["xarray"] == 6.0
    assert out["skimage"][0] is True and 0.0 <= out["skimage"][1] < 1.0
    assert out["nltk"] == [["Hello", ",", "world", "!"], ["Do", "n't", "."]]
    assert out["tabulate"].splitlines()[0].split() == ["a", "b"]
    assert out["tqdm"] == 10


def _check_documents(out):
    assert out["openpyxl"] == [["name", "n"], ["a", 2]]
    assert out["pandas_excel"] == 2
    assert out["xlrd"]
    assert out["docx"] == ["Hello from docx"]
    assert out["pdf"] == "Hello from reportlab"
    assert out["bs4"] == "/x" and out["lxml"] == "7"
    assert out["pil"] == [255, 0, 0]


def _json_of(r):
    assert r["status"] == "ok", r.get("error") or r
    return json.loads(r["stdout"].strip().splitlines()[-1])


def _pngs(r):
    return [base64.b64decode(o["data"]["image/png"], validate=True)
            for o in r["outputs"] if "image/png" in o["data"]]


@pytest.fixture(scope="module", autouse=True)
def stack_installed():
    missing = [f"{m} ({p})" for m, p in STACK.items() if importlib.util.find_spec(m) is None]
    if missing:
        pytest.fail("the data stack is not installed (scripts/deps.sh installs it): "
                    + ", ".join(missing), pytrace=False)


def _session(daemon, profile):
    sid = daemon.create_session(profile=profile)
    yield sid
    daemon.delete_session(sid)


@pytest.fixture(scope="module")
def default_sid(daemon):
    yield from _session(daemon, "default")


@pytest.fixture(scope="module")
def data_science_sid(daemon):
    yield from _session(daemon, "data-science")


# --- default: anything installed -----------------------------------------------------------

def test_default_imports_the_whole_stack(daemon, default_sid):
    r = daemon.execute(default_sid, "import " + ", ".join(STACK) + "\n"
                       "import requests, IPython\n"
                       "print(requests.__version__, IPython.__version__)")
    assert r["status"] == "ok", r.get("error") or r
    assert len(r["stdout"].split()) == 2, r["stdout"]


def test_default_analysis_and_documents(daemon, default_sid):
    _check_analysis(_json_of(daemon.execute(default_sid, ANALYSIS_CELL)))
    _check_documents(_json_of(daemon.execute(default_sid, DOCUMENTS_CELL)))


def test_default_seaborn_draws_a_png_and_plotly_a_figure(daemon, default_sid):
    r = daemon.execute(default_sid, "import seaborn as sns\nimport pandas as pd\n"
                       "sns.barplot(data=pd.DataFrame({'k': ['a', 'b'], 'v': [1, 3]}), "
                       "x='k', y='v');")
    assert r["status"] == "ok", r.get("error") or r
    pngs = _pngs(r)
    assert len(pngs) == 1 and pngs[0].startswith(PNG_MAGIC) and len(pngs[0]) > 1000, r["outputs"]
    r = daemon.execute(default_sid, "import plotly.express as px\npx.bar(x=['a', 'b'], y=[1, 3])")
    assert r["status"] == "ok", r.get("error") or r
    bundle = {k for o in r["outputs"] for k in o["data"]}
    assert {"application/vnd.plotly.v1+json", "text/html"} <= bundle, r["outputs"]


def test_nltk_data_is_not_shipped(daemon, default_sid):
    """nltk's tokenizers that need a model (punkt) are not on the machine: the error says which
    resource is missing and where nltk looked (/work/nltk_data first: an upload there works)."""
    r = daemon.execute(default_sid, "import nltk\nnltk.word_tokenize('Hello there.')")
    assert r["status"] == "error" and r["error"]["name"] == "LookupError", r
    assert "punkt" in r["error"]["value"] and "/work/nltk_data" in r["error"]["value"], r["error"]


# --- data-science: the analysis stack under the restricted policy ---------------------------

def test_data_science_runs_the_analysis_stack_under_its_policy(daemon, data_science_sid):
    _check_analysis(_json_of(daemon.execute(data_science_sid, ANALYSIS_CELL)))
    _check_documents(_json_of(daemon.execute(data_science_sid, DOCUMENTS_CELL)))


@pytest.mark.parametrize("module", ["seaborn", "plotly", "requests", "IPython"])
def test_data_science_refuses_what_it_does_not_allow(daemon, data_science_sid, module):
    r = daemon.execute(data_science_sid, f"import {module}")
    assert r["status"] == "error" and r["error"]["name"] == "ImportError", r
    msg = r["error"]["value"]
    assert msg.startswith(f"import of '{module}' is not allowed by profile 'data-science'"), msg
    allowed = msg.partition("allowed modules: ")[2].split(", ")
    assert set(ANALYSIS) <= set(allowed) and module not in allowed, allowed


def test_visualization_draws_with_seaborn_and_plotly(daemon):
    sid = daemon.create_session(profile="visualization")
    try:
        r = daemon.execute(sid, "import seaborn as sns\nimport pandas as pd\n"
                           "import plotly.express as px\n"
                           "sns.lineplot(data=pd.DataFrame({'x': [1, 2, 3], 'y': [3, 1, 2]}), "
                           "x='x', y='y')\n"
                           "px.line(x=[1, 2, 3], y=[3, 1, 2])")
        assert r["status"] == "ok", r.get("error") or r
        assert len(_pngs(r)) == 1, r["outputs"]
        bundle = {k for o in r["outputs"] for k in o["data"]}
        assert "application/vnd.plotly.v1+json" in bundle, r["outputs"]
        # show() too, in a profile without IPython's shell: an output, nothing printed.
        r = daemon.execute(sid, "px.bar(x=['a'], y=[1]).show()")
        assert r["status"] == "ok" and r["stdout"] == "", r
        assert [sorted(o["data"]) for o in r["outputs"]] == \
            [["application/vnd.plotly.v1+json", "text/html"]], r["outputs"]
        r = daemon.execute(sid, "import requests")
        assert r["status"] == "error" and "not allowed by profile 'visualization'" in \
            r["error"]["value"], r
    finally:
        daemon.delete_session(sid)
