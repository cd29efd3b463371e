/**
 * The "Insert %%kbsql cell" command: a new code cell below the active one, already
 * holding the magic, in edit mode with the cursor on the SQL line, so the next keystroke
 * is SQL (or, for a template such as `WHERE content = ''`, lands between the quotes).
 * Reachable from the command palette, a notebook toolbar button, and
 * `app.commands.execute('kbsql:insert-cell', {sql: '...'})` for other extensions;
 * `{markdown: '...'}` inserts a rendered Markdown cell instead (the chat's answers).
 */
import { JupyterFrontEnd } from '@jupyterlab/application';
import { CommandToolbarButton, ICommandPalette } from '@jupyterlab/apputils';
import { INotebookTracker, NotebookActions, NotebookPanel } from '@jupyterlab/notebook';

export const INSERT_CELL = 'kbsql:insert-cell';

export function addInsertCommand(
  app: JupyterFrontEnd,
  tracker: INotebookTracker,
  palette: ICommandPalette | null
): void {
  app.commands.addCommand(INSERT_CELL, {
    label: 'Insert %%kbsql cell',
    caption: 'Insert a %%kbsql SQL cell below the active cell',
    isEnabled: () => tracker.currentWidget !== null,
    execute: async args => {
      const panel = tracker.currentWidget;
      if (!panel) {
        return;
      }
      const notebook = panel.content;
      if (typeof args.markdown === 'string') {
        NotebookActions.insertBelow(notebook);
        NotebookActions.changeCellType(notebook, 'markdown');
        notebook.activeCell?.model.sharedModel.setSource(args.markdown);
        await NotebookActions.renderAllMarkdown(notebook);
        return;
      }
      const sql = typeof args.sql === 'string' ? args.sql : '';
      NotebookActions.insertBelow(notebook);
      if (notebook.activeCell?.model.type !== 'code') {
        NotebookActions.changeCellType(notebook, 'code');
      }
      const cell = notebook.activeCell;
      if (!cell) {
        return;
      }
      const source = `%%kbsql\n${sql}`;
      cell.model.sharedModel.setSource(source);
      notebook.mode = 'edit';
      // A windowed notebook creates the editor lazily: wait for it before moving the cursor.
      await cell.ready;
      const editor = cell.editor;
      if (!editor) {
        return;
      }
      // Into the first empty literal ('' of a query template), else at the end.
      const blank = source.indexOf("''");
      const offset = blank >= 0 ? blank + 1 : source.length;
      editor.setCursorPosition(editor.getPositionAt(offset) ?? { line: 1, column: 0 });
      editor.focus();
      // Run from the command palette, closing the palette hands focus back to the notebook
      // (in a later frame); take it back so the next keystroke lands in the SQL.
      requestAnimationFrame(() => {
        if (notebook.activeCell === cell && !editor.hasFocus()) {
          notebook.mode = 'edit';
          editor.focus();
        }
      });
    }
  });
  palette?.addItem({ command: INSERT_CELL, category: 'kbsql' });
  app.docRegistry.addWidgetExtension('Notebook', {
    createNew(panel: NotebookPanel) {
      const button = new CommandToolbarButton({
        commands: app.commands,
        id: INSERT_CELL,
        label: '%%kbsql'
      });
      button.addClass('kbsql-InsertCellButton');
      if (!panel.toolbar.insertAfter('cellType', 'kbsql-insert-cell', button)) {
        panel.toolbar.addItem('kbsql-insert-cell', button);
      }
      return button;
    }
  });
}
