/**
 * kbsql for JupyterLab: SQL highlighting in `%%kbsql` / `%kbsql` cells, an
 * "Insert %%kbsql cell" command (palette, notebook toolbar, and the API), and a sidebar
 * listing a kbsql server's knowledge bases and agents.
 *
 * Three plugins so each can be disabled on its own (`jupyter labextension disable
 * kbsql-labextension:highlight`), as jupysql's plugin does.
 */
import { ILayoutRestorer, JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import {
  EditorExtensionRegistry,
  IEditorExtensionRegistry,
  IEditorLanguageRegistry
} from '@jupyterlab/codemirror';
import { INotebookTracker } from '@jupyterlab/notebook';

import { addInsertCommand } from './commands';
import { kbsqlEditorExtension, kbsqlLanguage } from './language';
import { KbsqlSidebar } from './sidebar';

/**
 * Markdown cells never run magics. Everything else may: code cells are `text/plain`
 * until the kernel's language is known, so an allow-list would miss a notebook's first
 * render.
 */
const isMarkdown = (mime: string) => /markdown|gfm/.test(mime);

const highlight: JupyterFrontEndPlugin<void> = {
  id: 'kbsql-labextension:highlight',
  description: 'Highlights the SQL of %%kbsql and %kbsql magics in notebook cells.',
  autoStart: true,
  requires: [IEditorExtensionRegistry, IEditorLanguageRegistry],
  activate: async (
    _app: JupyterFrontEnd,
    extensions: IEditorExtensionRegistry,
    languages: IEditorLanguageRegistry
  ) => {
    // JupyterLab's own Python for the Python around line magics.
    const python = await languages.getLanguage('text/x-ipython');
    if (!python?.support) {
      console.warn('kbsql: the ipython language is unavailable; no %%kbsql highlighting');
      return;
    }
    const language = kbsqlLanguage(python.support.language.parser);
    extensions.addExtension({
      name: 'kbsql:magic-sql',
      factory: ({ model }) =>
        EditorExtensionRegistry.createImmutableExtension(
          kbsqlEditorExtension(language, model.sharedModel.getSource(), () =>
            !isMarkdown(model.mimeType)
          )
        )
    });
  }
};

const insertCell: JupyterFrontEndPlugin<void> = {
  id: 'kbsql-labextension:insert-cell',
  description: 'Adds the "Insert %%kbsql cell" command to the palette and the notebook toolbar.',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ICommandPalette],
  activate: (app: JupyterFrontEnd, tracker: INotebookTracker, palette: ICommandPalette | null) => {
    addInsertCommand(app, tracker, palette);
  }
};

const sidebar: JupyterFrontEndPlugin<void> = {
  id: 'kbsql-labextension:sidebar',
  description: 'A left sidebar listing the knowledge bases and agents of a kbsql server.',
  autoStart: true,
  optional: [ILayoutRestorer, ICommandPalette],
  activate: (app: JupyterFrontEnd, restorer: ILayoutRestorer | null, palette: ICommandPalette | null) => {
    const widget = new KbsqlSidebar(app);
    app.shell.add(widget, 'left', { rank: 850 });
    restorer?.add(widget, widget.id);
    app.commands.addCommand('kbsql:open-sidebar', {
      label: 'Show kbsql knowledge bases and agents',
      execute: () => {
        app.shell.activateById(widget.id);
        return widget.refresh();
      }
    });
    palette?.addItem({ command: 'kbsql:open-sidebar', category: 'kbsql' });
  }
};

export default [highlight, insertCell, sidebar];
