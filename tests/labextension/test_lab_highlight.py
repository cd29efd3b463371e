"""The kbsql JupyterLab extension in a real JupyterLab, driven by headless Chromium.

A user types cells with the keyboard; the test reads the colours CodeMirror gives each word
(the class JupyterLab's theme puts on keywords, and the computed colour). SQL keywords in
`%%kbsql` cells and after `%kbsql` must look like keywords; the same words used as Python
names in Python code must not. The "Insert %%kbsql cell" command is used from the notebook
toolbar and from the command palette. A screenshot lands in the test's tmp dir.
"""

from __future__ import annotations

from tests.labextension.helpers import open_notebook, sources, wait_for, write_notebook

# Where each occurrence of a word sits: the class of the element holding its text and the
# colour the user sees. Text nodes are searched so unstyled words (no span) are found too.
TOKENS_JS = """([index, word]) => {
  const cell = document.querySelectorAll('.jp-Notebook .jp-Cell')[index];
  const content = cell.querySelector('.cm-content');
  const walker = document.createTreeWalker(content, NodeFilter.SHOW_TEXT);
  const found = [];
  const pattern = new RegExp('(^|[^\\\\w%])' + word + '(?![\\\\w])', 'g');
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (const m of node.textContent.matchAll(pattern)) {
      const el = node.parentElement;
      found.push({cls: el.classList.contains('cm-line') ? '' : el.className,
                  color: getComputedStyle(el).color});
    }
  }
  return found;
}"""

SQL = "SELECT * FROM kb WHERE content = 'x' LIMIT 5"


def tokens(page, index: int, word: str) -> list[dict]:
    return page.evaluate(TOKENS_JS, [index, word])


def new_cell_below(page) -> None:
    page.keyboard.press("Escape")
    page.keyboard.press("b")
    page.keyboard.press("Enter")


def test_kbsql_cells_are_highlighted_as_sql_and_the_insert_command_works(jupyterlab, browser_page, tmp_path):
    root = jupyterlab.root
    write_notebook(root / "lab.ipynb")
    page = browser_page
    open_notebook(page, jupyterlab, "lab.ipynb")

    # Cell 0: a %%kbsql cell typed by hand.
    page.locator(".jp-Notebook .jp-Cell .cm-content").first.click()
    page.keyboard.type("%%kbsql")
    page.keyboard.press("Enter")
    page.keyboard.type(SQL)
    # Cell 1: plain Python that uses the same words as names.
    new_cell_below(page)
    page.keyboard.type("for SELECT in range(3):")
    page.keyboard.press("Enter")
    page.keyboard.type("FROM = SELECT")
    # Cell 2: Python with a %kbsql line magic: SQL on that line only.
    new_cell_below(page)
    page.keyboard.type("rows = %kbsql --limit 5 SELECT name FROM kb LIMIT 3")
    page.keyboard.press("Enter")
    page.keyboard.type("for SELECT in rows: pass")

    assert sources(page) == [f"%%kbsql\n{SQL}", "for SELECT in range(3):\n    FROM = SELECT",
                             "rows = %kbsql --limit 5 SELECT name FROM kb LIMIT 3\nfor SELECT in rows: pass"]

    # The reference: what JupyterLab's theme does to a Python keyword.
    keyword = wait_for(lambda: [t for t in tokens(page, 1, "for") if t["cls"]], "Python highlighting")[0]

    def is_keyword(token: dict) -> bool:
        return token["cls"] == keyword["cls"] and token["color"] == keyword["color"]

    sql_words = ["SELECT", "FROM", "WHERE", "LIMIT"]
    wait_for(lambda: all(is_keyword(t) for w in sql_words for t in tokens(page, 0, w)), "SQL keywords")
    for word in sql_words:
        (found,) = tokens(page, 0, word)
        assert is_keyword(found), (word, found, keyword)
    # The string literal and the column name are not keywords.
    assert not is_keyword(tokens(page, 0, "content")[0])
    assert not is_keyword(tokens(page, 0, "'x'")[0])
    # The magic itself is styled (meta), not left as plain text or turned into SQL.
    (magic,) = tokens(page, 0, "%%kbsql")
    assert magic["cls"] and not is_keyword(magic)

    # Plain Python: SELECT and FROM are names, not SQL keywords.
    for word in ["SELECT", "FROM"]:
        found = tokens(page, 1, word)
        assert found and not any(is_keyword(t) for t in found), (word, found)

    # Line magic: SQL keywords on the magic's line, Python names on the next line.
    wait_for(lambda: is_keyword(tokens(page, 2, "LIMIT")[0]), "line-magic SQL")
    select_sql, select_python = tokens(page, 2, "SELECT")
    assert is_keyword(select_sql) and is_keyword(tokens(page, 2, "FROM")[0])
    assert not is_keyword(select_python), select_python
    # The magic's options are part of the magic (styled like it), not SQL.
    assert tokens(page, 2, "--limit")[0]["cls"] == tokens(page, 2, "%kbsql")[0]["cls"] != ""
    python_keywords = tokens(page, 2, "for") + tokens(page, 2, "pass")
    assert len(python_keywords) == 2 and all(is_keyword(t) for t in python_keywords)

    # "Insert %%kbsql cell" from the notebook toolbar: a new cell below, in edit mode on
    # the SQL line, so typing goes straight into the SQL.
    page.keyboard.press("Escape")
    page.locator(".kbsql-InsertCellButton").first.click()
    wait_for(lambda: len(sources(page)) == 4, "the inserted cell")
    assert sources(page)[3] == "%%kbsql\n"
    page.keyboard.type("SHOW KNOWLEDGE_BASES")
    assert sources(page)[3] == "%%kbsql\nSHOW KNOWLEDGE_BASES"
    wait_for(lambda: is_keyword(tokens(page, 3, "SHOW")[0]), "SHOW highlighted in the inserted cell")
    assert is_keyword(tokens(page, 3, "KNOWLEDGE_BASES")[0])  # a MindsDB word, not MySQL's

    # The same command from the command palette.
    page.keyboard.press("Escape")
    page.keyboard.press("Control+Shift+C")
    page.keyboard.type("Insert %%kbsql cell")
    page.keyboard.press("Enter")
    wait_for(lambda: len(sources(page)) == 5, "the cell inserted from the palette")
    assert sources(page)[4] == "%%kbsql\n"
    page.keyboard.type("SELECT 1")
    wait_for(lambda: is_keyword(tokens(page, 4, "SELECT")[0]), "SELECT highlighted in the palette's cell")
    # Deleting the magic turns the cell back into Python on that keystroke's transaction.
    page.keyboard.press("Control+Home")
    page.keyboard.press("Delete")
    page.keyboard.press("Delete")
    assert sources(page)[4] == "kbsql\nSELECT 1"
    wait_for(lambda: not is_keyword(tokens(page, 4, "SELECT")[0]), "SQL highlighting switched off")

    shot = tmp_path / "kbsql-labextension.png"
    page.locator(".jp-Notebook .jp-Cell").first.scroll_into_view_if_needed()
    page.screenshot(path=str(shot))
    assert shot.stat().st_size > 10_000
