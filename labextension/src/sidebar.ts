/**
 * The kbsql sidebar: the knowledge bases and agents of a kbsql server, one click from a
 * query. Clicking a knowledge base inserts a semantic-search `%%kbsql` cell for it; an
 * agent, a question cell. The list comes from the Jupyter server's `/kbsql/catalog` route
 * (a kbsql server sends no CORS headers, so the page cannot ask it directly).
 */
import { JupyterFrontEnd } from '@jupyterlab/application';
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';
import { LabIcon } from '@jupyterlab/ui-components';
import { Widget } from '@lumino/widgets';

import { INSERT_CELL } from './commands';

const URL_KEY = 'kbsql-labextension:url';
const DEFAULT_URL = 'http://127.0.0.1:47334';

const ICON_SVG = `<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24">
<g class="jp-icon3" fill="#616161"><ellipse cx="12" cy="5" rx="8" ry="3"/>
<path d="M4 7v4c0 1.7 3.6 3 8 3s8-1.3 8-3V7c0 1.7-3.6 3-8 3S4 8.7 4 7z"/>
<path d="M4 13v4c0 1.7 3.6 3 8 3s8-1.3 8-3v-4c0 1.7-3.6 3-8 3s-8-1.3-8-3z"/></g></svg>`;

export const kbsqlIcon = new LabIcon({ name: 'kbsql-labextension:icon', svgstr: ICON_SVG });

interface ICatalog {
  url: string;
  projects: {
    name: string;
    knowledge_bases: { name: string; content_columns: string[]; metadata_columns: string[] }[];
    agents: { name: string; knowledge_bases: string[]; tables: string[] }[];
  }[];
}

/** SQL identifiers as MindsDB quotes them: plain names bare, anything else in backticks. */
const ident = (name: string) => (/^[A-Za-z_][\w]*$/.test(name) ? name : `\`${name}\``);

export class KbsqlSidebar extends Widget {
  private input: HTMLInputElement;
  private status: HTMLElement;
  private list: HTMLElement;

  constructor(private app: JupyterFrontEnd) {
    super();
    this.id = 'kbsql-sidebar';
    this.addClass('kbsql-Sidebar');
    this.title.icon = kbsqlIcon;
    this.title.caption = 'kbsql: knowledge bases and agents';

    const form = document.createElement('form');
    form.className = 'kbsql-Sidebar-form';
    this.input = document.createElement('input');
    this.input.className = 'jp-mod-styled kbsql-Sidebar-url';
    this.input.placeholder = 'kbsql server URL';
    this.input.value = window.localStorage.getItem(URL_KEY) ?? DEFAULT_URL;
    this.input.setAttribute('aria-label', 'kbsql server URL');
    const refresh = document.createElement('button');
    refresh.type = 'submit';
    refresh.className = 'jp-mod-styled jp-mod-accept kbsql-Sidebar-refresh';
    refresh.textContent = 'Refresh';
    form.append(this.input, refresh);
    form.addEventListener('submit', event => {
      event.preventDefault();
      void this.refresh();
    });

    this.status = document.createElement('div');
    this.status.className = 'kbsql-Sidebar-status';
    this.list = document.createElement('div');
    this.list.className = 'kbsql-Sidebar-list';
    this.node.append(form, this.status, this.list);
  }

  /** Ask the Jupyter server for the catalog of the URL in the box and show it. */
  async refresh(): Promise<void> {
    const url = this.input.value.trim();
    window.localStorage.setItem(URL_KEY, url);
    this.status.textContent = 'Loading…';
    this.status.dataset.state = 'loading';
    const settings = ServerConnection.makeSettings();
    const endpoint = URLExt.join(settings.baseUrl, 'kbsql', 'catalog') + URLExt.objectToQueryString({ url });
    try {
      const response = await ServerConnection.makeRequest(endpoint, {}, settings);
      const body = await response.json();
      if (!response.ok) {
        throw new Error(body.detail ?? body.message ?? response.statusText);
      }
      this.render(body as ICatalog);
      this.status.textContent = `${url}`;
      this.status.dataset.state = 'ok';
    } catch (error) {
      this.list.replaceChildren();
      this.status.textContent = `${(error as Error).message}`;
      this.status.dataset.state = 'error';
    }
  }

  private render(catalog: ICatalog): void {
    const sections: HTMLElement[] = [];
    for (const project of catalog.projects) {
      const section = document.createElement('section');
      section.className = 'kbsql-Sidebar-project';
      section.dataset.project = project.name;
      const heading = document.createElement('h3');
      heading.textContent = project.name;
      section.append(heading);
      for (const kb of project.knowledge_bases) {
        const detail = [...kb.content_columns, ...kb.metadata_columns].join(', ');
        const sql = `SELECT * FROM ${ident(project.name)}.${ident(kb.name)} WHERE content = '' LIMIT 10`;
        section.append(this.item('kb', kb.name, detail, sql));
      }
      for (const agent of project.agents) {
        const detail = [...agent.knowledge_bases, ...agent.tables].join(', ');
        const sql = `SELECT answer FROM ${ident(project.name)}.${ident(agent.name)} WHERE question = ''`;
        section.append(this.item('agent', agent.name, detail, sql));
      }
      if (!project.knowledge_bases.length && !project.agents.length) {
        const empty = document.createElement('div');
        empty.className = 'kbsql-Sidebar-empty';
        empty.textContent = 'No knowledge bases or agents';
        section.append(empty);
      }
      sections.push(section);
    }
    this.list.replaceChildren(...sections);
  }

  /** One clickable row; clicking inserts a `%%kbsql` cell with `sql` in the current notebook. */
  private item(kind: 'kb' | 'agent', name: string, detail: string, sql: string): HTMLElement {
    const row = document.createElement('button');
    row.className = `kbsql-Sidebar-item kbsql-Sidebar-${kind}`;
    row.dataset.name = name;
    row.title = `Insert a %%kbsql cell:\n${sql}`;
    const badge = document.createElement('span');
    badge.className = 'kbsql-Sidebar-badge';
    badge.textContent = kind === 'kb' ? 'KB' : 'agent';
    const label = document.createElement('span');
    label.className = 'kbsql-Sidebar-name';
    label.textContent = name;
    const more = document.createElement('span');
    more.className = 'kbsql-Sidebar-detail';
    more.textContent = detail;
    row.append(badge, label, more);
    row.addEventListener('click', () => {
      if (this.app.commands.isEnabled(INSERT_CELL)) {
        void this.app.commands.execute(INSERT_CELL, { sql });
      } else {
        this.status.textContent = 'Open a notebook to insert a query';
        this.status.dataset.state = 'error';
      }
    });
    return row;
  }
}
