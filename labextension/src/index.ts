/**
 * kbsql for JupyterLab: SQL highlighting in `%%kbsql` / `%kbsql` cells, an
 * "Insert %%kbsql cell" command (palette, notebook toolbar, and the API), a sidebar listing
 * the current connection's knowledge bases, agents and tables, and a docked agent chat.
 *
 * Separate plugins so each can be disabled on its own (`jupyter labextension disable
 * kbsql-labextension:highlight`), as jupysql's plugin does. The connection plugin holds the
 * settings (server URL, token) and the catalog both panels show.
 */
import { ILayoutRestorer, JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import {
  EditorExtensionRegistry,
  IEditorExtensionRegistry,
  IEditorLanguageRegistry
} from '@jupyterlab/codemirror';
import { INotebookTracker } from '@jupyterlab/notebook';
import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { IFormRendererRegistry } from '@jupyterlab/ui-components';

import { KbsqlChat } from './chat';
import { addInsertCommand } from './commands';
import { kbsqlEditorExtension, kbsqlLanguage } from './language';
import { CONNECTION_PLUGIN, IKbsqlModel, KbsqlModel } from './model';
import { passwordRenderer } from './password';
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

const connection: JupyterFrontEndPlugin<KbsqlModel> = {
  id: CONNECTION_PLUGIN,
  description: 'The kbsql connection (settings: server URL and token) shared by the sidebar and the chat.',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ISettingRegistry, IFormRendererRegistry],
  provides: IKbsqlModel,
  activate: (
    app: JupyterFrontEnd,
    tracker: INotebookTracker,
    registry: ISettingRegistry | null,
    forms: IFormRendererRegistry | null
  ) => {
    const model = new KbsqlModel(tracker);
    forms?.addRenderer(`${CONNECTION_PLUGIN}.token`, passwordRenderer);
    if (registry) {
      registry
        .load(CONNECTION_PLUGIN)
        .then(settings => model.useSettings(settings))
        .catch(reason => {
          console.warn('kbsql: settings unavailable, using the embedded engine', reason);
          model.useDefaults();
        });
    } else {
      model.useDefaults();
    }
    return model;
  }
};

const sidebar: JupyterFrontEndPlugin<void> = {
  id: 'kbsql-labextension:sidebar',
  description: 'A left sidebar listing the knowledge bases, agents and tables of the kbsql connection.',
  autoStart: true,
  requires: [IKbsqlModel],
  optional: [ILayoutRestorer, ICommandPalette],
  activate: (
    app: JupyterFrontEnd,
    model: KbsqlModel,
    restorer: ILayoutRestorer | null,
    palette: ICommandPalette | null
  ) => {
    const widget = new KbsqlSidebar(app, model);
    app.shell.add(widget, 'left', { rank: 850 });
    restorer?.add(widget, widget.id);
    app.commands.addCommand('kbsql:open-sidebar', {
      label: 'Show kbsql knowledge bases and agents',
      execute: () => {
        app.shell.activateById(widget.id);
        return model.refresh();
      }
    });
    palette?.addItem({ command: 'kbsql:open-sidebar', category: 'kbsql' });
  }
};

const chat: JupyterFrontEndPlugin<void> = {
  id: 'kbsql-labextension:chat',
  description: 'A chat with a kbsql agent, docked in the right sidebar.',
  autoStart: true,
  requires: [IKbsqlModel],
  optional: [ILayoutRestorer, ICommandPalette, IRenderMimeRegistry],
  activate: (
    app: JupyterFrontEnd,
    model: KbsqlModel,
    restorer: ILayoutRestorer | null,
    palette: ICommandPalette | null,
    rendermime: IRenderMimeRegistry | null
  ) => {
    const widget = new KbsqlChat(app, model, rendermime);
    app.shell.add(widget, 'right', { rank: 900 });
    restorer?.add(widget, widget.id);
    app.commands.addCommand('kbsql:open-chat', {
      label: 'Ask a kbsql agent',
      execute: () => app.shell.activateById(widget.id)
    });
    palette?.addItem({ command: 'kbsql:open-chat', category: 'kbsql' });
  }
};

export default [highlight, insertCell, connection, sidebar, chat];
