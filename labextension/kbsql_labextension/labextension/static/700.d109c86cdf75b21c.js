"use strict";(self.rspackChunkkbsql_labextension=self.rspackChunkkbsql_labextension||[]).push([[700],{851(e,t,o){var a=o(126),r=o.n(a),n=o(719),i=(o.n(n))()(r());i.push([e.id,`/* The toolbar button shows its label ("%%kbsql") in the editor's monospace font. */
.kbsql-InsertCellButton .jp-ToolbarButtonComponent-label {
  font-family: var(--jp-code-font-family);
}

.kbsql-Sidebar,
.kbsql-Chat {
  display: flex;
  flex-direction: column;
  background: var(--jp-layout-color1);
  color: var(--jp-ui-font-color1);
  font-size: var(--jp-ui-font-size1);
  padding: 8px;
  gap: 6px;
  overflow: auto;
  min-width: 240px;
}

.kbsql-Sidebar button:focus-visible,
.kbsql-Chat button:focus-visible,
.kbsql-Sidebar summary:focus-visible,
.kbsql-Chat summary:focus-visible {
  outline: 2px solid var(--jp-brand-color1);
  outline-offset: -2px;
}

.kbsql-Sidebar-header,
.kbsql-Chat-header,
.kbsql-Sidebar-search,
.kbsql-Chat-buttons {
  display: flex;
  gap: 4px;
  align-items: center;
}

.kbsql-Sidebar-connection {
  flex: 1;
  min-width: 0;
  font-family: var(--jp-code-font-family);
  color: var(--jp-ui-font-color2);
  overflow: hidden;
  text-overflow: ellipsis;
  white-space: nowrap;
}

.kbsql-Sidebar-search {
  flex-wrap: wrap;
}

.kbsql-Sidebar-kbSelect {
  flex: 1 1 100%;
  min-width: 0;
}

.kbsql-Chat-agent {
  flex: 1 1 auto;
  min-width: 0;
  text-overflow: ellipsis;
}

.kbsql-Chat-header button,
.kbsql-Sidebar-header button {
  flex: none;
  white-space: nowrap;
}

.kbsql-Sidebar-searchText {
  flex: 1;
  min-width: 0;
}

/* One line, cut with an ellipsis; the element's title holds the whole text. */
.kbsql-ellipsis {
  min-width: 0;
  overflow: hidden;
  text-overflow: ellipsis;
  white-space: nowrap;
}

/* Sentences wrap between words; only a word longer than the panel is broken. */
.kbsql-Sidebar-status,
.kbsql-Chat-note {
  color: var(--jp-ui-font-color2);
  overflow-wrap: break-word;
}

.kbsql-Sidebar-status[data-state='error'],
.kbsql-Sidebar-counts[data-state='error'],
.kbsql-Chat-note[data-state='error'],
.kbsql-Sidebar-error,
.kbsql-Chat-status[data-state='error'] {
  color: var(--jp-error-color1);
}

.kbsql-Sidebar-hits:empty {
  display: none;
}

.kbsql-Sidebar-hits {
  border: var(--jp-border-width) solid var(--jp-border-color2);
  padding: 4px;
}

.kbsql-Sidebar-hitsHead {
  display: flex;
  justify-content: space-between;
  align-items: center;
  gap: 4px;
  min-width: 0;
}

.kbsql-Sidebar-hitsHead button,
.kbsql-Chat-insert {
  flex: none;
  white-space: nowrap;
  height: auto;
  padding: 1px 6px;
  font-size: var(--jp-ui-font-size0);
}

.kbsql-Sidebar-hitList {
  margin: 4px 0 0;
  padding-left: 20px;
}

.kbsql-Sidebar-hit {
  margin-bottom: 4px;
}

.kbsql-Sidebar-hitMeta {
  display: flex;
  justify-content: space-between;
  gap: 6px;
  color: var(--jp-ui-font-color2);
  font-size: var(--jp-ui-font-size0);
}

.kbsql-Sidebar-hitText {
  display: -webkit-box;
  -webkit-line-clamp: 3;
  -webkit-box-orient: vertical;
  overflow: hidden;
  overflow-wrap: break-word;
}

.kbsql-Sidebar-project h3,
.kbsql-Sidebar-sources h3 {
  font-size: var(--jp-ui-font-size1);
  font-weight: 600;
  margin: 8px 0 4px;
  text-transform: uppercase;
  color: var(--jp-ui-font-color2);
}

.kbsql-Sidebar-sourceName {
  font-family: var(--jp-code-font-family);
  font-weight: 600;
  margin-top: 4px;
}

/* A name on its line (badge, then the name cut with an ellipsis), counts under it. */
.kbsql-Sidebar-item {
  display: flex;
  flex-direction: column;
  align-items: stretch;
  gap: 0;
  width: 100%;
  min-width: 0;
  padding: 4px 6px;
  border: none;
  background: none;
  color: inherit;
  font: inherit;
  text-align: left;
  cursor: pointer;
}

.kbsql-Sidebar-item:hover {
  background: var(--jp-layout-color2);
}

/* Outlined badges: readable on light and dark themes alike. */
.kbsql-Sidebar-badge {
  font-size: var(--jp-ui-font-size0);
  padding: 0 4px;
  border-radius: 2px;
  border: 1px solid var(--jp-brand-color1);
  color: var(--jp-brand-color1);
}

.kbsql-Sidebar-agent .kbsql-Sidebar-badge {
  border-color: var(--jp-accent-color1);
  color: var(--jp-accent-color1);
}

.kbsql-Sidebar-table .kbsql-Sidebar-badge {
  border-color: var(--jp-ui-font-color2);
  color: var(--jp-ui-font-color2);
}

.kbsql-Sidebar-line {
  display: flex;
  align-items: baseline;
  gap: 6px;
  min-width: 0;
}

.kbsql-Sidebar-badge {
  flex: none;
}

.kbsql-Sidebar-name {
  font-family: var(--jp-code-font-family);
}

.kbsql-Sidebar-counts {
  color: var(--jp-ui-font-color2);
  font-size: var(--jp-ui-font-size0);
  padding-left: 2px;
}

.kbsql-Sidebar-details {
  display: grid;
  grid-template-columns: auto minmax(0, 1fr);
  gap: 0 8px;
  margin: 0 0 4px 12px;
  color: var(--jp-ui-font-color2);
  font-size: var(--jp-ui-font-size0);
}

.kbsql-Sidebar-details dt {
  font-weight: 600;
  white-space: nowrap;
}

.kbsql-Sidebar-details dd {
  margin: 0;
}

.kbsql-Sidebar-empty {
  color: var(--jp-ui-font-color2);
  overflow: hidden;
  text-overflow: ellipsis;
  white-space: nowrap;
}

.kbsql-Chat {
  overflow: hidden;
}

.kbsql-Chat-log {
  flex: 1;
  min-width: 0;
  overflow-x: hidden;
  overflow-y: auto;
  display: flex;
  flex-direction: column;
  gap: 8px;
}

.kbsql-Chat-turn {
  min-width: 0;
  border-left: 3px solid var(--jp-brand-color2);
  padding-left: 4px;
}

.kbsql-Chat-you {
  font-weight: 600;
  white-space: pre-wrap;
  overflow-wrap: break-word;
}

/* A server's progress notes: grey, one or two lines each (the whole note on hover). */
.kbsql-Chat-notes {
  margin: 4px 0;
  padding-left: 0;
  list-style: none;
  color: var(--jp-ui-font-color2);
  font-size: var(--jp-ui-font-size0);
}

.kbsql-Chat-notes li::before {
  content: '\xb7 ';
}

.kbsql-Chat-notes li {
  display: -webkit-box;
  -webkit-line-clamp: 2;
  -webkit-box-orient: vertical;
  overflow: hidden;
  overflow-wrap: break-word;
}

.kbsql-Chat-steps {
  margin: 4px 0;
  padding-left: 18px;
}

.kbsql-Chat-stepHead {
  display: flex;
  flex-wrap: wrap;
  justify-content: space-between;
  align-items: center;
  gap: 2px 4px;
}

.kbsql-Chat-tool {
  font-family: var(--jp-code-font-family);
  color: var(--jp-brand-color1);
}

.kbsql-Chat-step pre {
  margin: 2px 0;
  padding: 2px 4px;
  background: var(--jp-layout-color2);
  color: var(--jp-content-font-color1);
  font-family: var(--jp-code-font-family);
  font-size: var(--jp-code-font-size);
  white-space: pre-wrap;
  overflow-wrap: anywhere;
  max-height: 12em;
  overflow: auto;
}

.kbsql-Chat-observation summary {
  cursor: pointer;
  color: var(--jp-ui-font-color2);
}

/* A tool's rows, as the %agent panel shows them: a small table that scrolls inside the panel.
   It keeps its own width (max-content, each column at most 18em) and the box scrolls sideways:
   fitted to the docked panel's ~230px, six columns broke every header and value letter by
   letter ("rel / eva / nce", "0.78 / 15"). */
.kbsql-Chat-tableBox {
  max-height: 16em;
  overflow: auto;
  margin: 2px 0;
}

.kbsql-Chat-table {
  border-collapse: collapse;
  width: max-content;
  font-size: var(--jp-ui-font-size0);
  color: var(--jp-content-font-color1);
}

.kbsql-Chat-table th,
.kbsql-Chat-table td {
  border: 1px solid var(--jp-border-color2);
  padding: 1px 4px;
  text-align: left;
  vertical-align: top;
  max-width: 18em;
  overflow-wrap: break-word; /* at spaces; a word longer than 18em still breaks */
}

.kbsql-Chat-table th {
  background: var(--jp-layout-color2);
  white-space: nowrap;
}

.kbsql-Chat-rowcount {
  font-size: var(--jp-ui-font-size0);
  color: var(--jp-ui-font-color2);
}

.kbsql-Chat-answer {
  background: var(--jp-layout-color2);
  padding: 4px;
  border-radius: 2px;
}

.kbsql-Chat-answerText {
  overflow-wrap: break-word; /* a long name or URL wraps instead of running past the panel */
  margin-bottom: 4px;
}

.kbsql-Chat-answerText[data-rendered='text'] {
  white-space: pre-wrap;
}

/* The rendered Markdown, fitted to a narrow panel: JupyterLab's notebook sizes are for a page. */
.kbsql-Chat-answerText {
  --jp-content-font-size1: var(--jp-ui-font-size1);
  --jp-content-line-height: 1.45;
  --jp-code-font-size: 12px;
}

.kbsql-Chat-answerText .jp-RenderedMarkdown {
  padding: 0;
}

.kbsql-Chat-answerText .jp-RenderedHTMLCommon > *:first-child {
  margin-top: 0;
}

.kbsql-Chat-answerText .jp-RenderedHTMLCommon > *:last-child {
  margin-bottom: 0;
}

/* Code a little smaller than the text (JupyterLab's themed rule says \`inherit\`). */
.kbsql-Chat .kbsql-Chat-answerText .jp-RenderedHTMLCommon code,
.kbsql-Chat .kbsql-Chat-answerText .jp-RenderedHTMLCommon pre {
  font-size: 11.5px;
  overflow-wrap: anywhere; /* an identifier longer than the panel is wide breaks (never clipped) */
  white-space: pre-wrap;
}

.kbsql-Chat .kbsql-Chat-answerText .jp-RenderedHTMLCommon :not(pre) > code {
  padding: 0 2px;
}

.kbsql-Chat-answerText table {
  display: block;
  max-width: 100%;
  overflow-x: auto;
}

.kbsql-Chat-status {
  color: var(--jp-ui-font-color2);
  font-size: var(--jp-ui-font-size0);
}

.kbsql-Chat-form {
  display: flex;
  flex-direction: column;
  gap: 4px;
}

.kbsql-Chat-question {
  resize: vertical;
  font: inherit;
  color: var(--jp-ui-font-color1);
  background: var(--jp-layout-color1);
}

/* The token field of the settings editor, laid out like the fields around it. */
.kbsql-TokenField {
  display: flex;
  align-items: center;
  gap: 8px;
}
`,""]),o.d(t,{},{A:i})},719(e){e.exports=function(e){var t=[];return t.toString=function(){return this.map(function(t){var o="",a=void 0!==t[5];return t[4]&&(o+="@supports (".concat(t[4],") {")),t[2]&&(o+="@media ".concat(t[2]," {")),a&&(o+="@layer".concat(t[5].length>0?" ".concat(t[5]):""," {")),o+=e(t),a&&(o+="}"),t[2]&&(o+="}"),t[4]&&(o+="}"),o}).join("")},t.i=function(e,o,a,r,n){"string"==typeof e&&(e=[[null,e,void 0]]);var i={};if(a)for(var l=0;l<this.length;l++){var s=this[l][0];null!=s&&(i[s]=!0)}for(var p=0;p<e.length;p++){var d=[].concat(e[p]);a&&i[d[0]]||(void 0!==n&&(void 0===d[5]||(d[1]="@layer".concat(d[5].length>0?" ".concat(d[5]):""," {").concat(d[1],"}")),d[5]=n),o&&(d[2]&&(d[1]="@media ".concat(d[2]," {").concat(d[1],"}")),d[2]=o),r&&(d[4]?(d[1]="@supports (".concat(d[4],") {").concat(d[1],"}"),d[4]=r):d[4]="".concat(r)),t.push(d))}},t}},126(e){e.exports=function(e){return e[1]}},559(e){var t=[];function o(e){for(var o=-1,a=0;a<t.length;a++)if(t[a].identifier===e){o=a;break}return o}function a(e,a){for(var r={},n=[],i=0;i<e.length;i++){var l=e[i],s=a.base?l[0]+a.base:l[0],p=r[s]||0,d="".concat(s," ").concat(p);r[s]=p+1;var c=o(d),b={css:l[1],media:l[2],sourceMap:l[3],supports:l[4],layer:l[5]};if(-1!==c)t[c].references++,t[c].updater(b);else{var f=function(e,t){var o=t.domAPI(t);return o.update(e),function(t){t?(t.css!==e.css||t.media!==e.media||t.sourceMap!==e.sourceMap||t.supports!==e.supports||t.layer!==e.layer)&&o.update(e=t):o.remove()}}(b,a);a.byIndex=i,t.splice(i,0,{identifier:d,updater:f,references:1})}n.push(d)}return n}e.exports=function(e,r){var n=a(e=e||[],r=r||{});return function(e){e=e||[];for(var i=0;i<n.length;i++){var l=o(n[i]);t[l].references--}for(var s=a(e,r),p=0;p<n.length;p++){var d=o(n[p]);0===t[d].references&&(t[d].updater(),t.splice(d,1))}n=s}}},672(e){var t={};e.exports=function(e,o){var a=function(e){if(void 0===t[e]){var o=document.querySelector(e);if(window.HTMLIFrameElement&&o instanceof window.HTMLIFrameElement)try{o=o.contentDocument.head}catch(e){o=null}t[e]=o}return t[e]}(e);if(!a)throw Error("Couldn't find a style target. This probably means that the value for the 'insert' parameter is invalid.");a.appendChild(o)}},691(e){e.exports=function(e){var t=document.createElement("style");return e.setAttributes(t,e.attributes),e.insert(t,e.options),t}},215(e,t,o){e.exports=function(e){var t=o.nc;t&&e.setAttribute("nonce",t)}},204(e){e.exports=function(e){if("u"<typeof document)return{update:function(){},remove:function(){}};var t=e.insertStyleElement(e);return{update:function(o){var a,r,n;a="",o.supports&&(a+="@supports (".concat(o.supports,") {")),o.media&&(a+="@media ".concat(o.media," {")),(r=void 0!==o.layer)&&(a+="@layer".concat(o.layer.length>0?" ".concat(o.layer):""," {")),a+=o.css,r&&(a+="}"),o.media&&(a+="}"),o.supports&&(a+="}"),(n=o.sourceMap)&&"u">typeof btoa&&(a+="\n/*# sourceMappingURL=data:application/json;base64,".concat(btoa(unescape(encodeURIComponent(JSON.stringify(n))))," */")),e.styleTagTransform(a,t,e.options)},remove:function(){var e;null===(e=t).parentNode||e.parentNode.removeChild(e)}}}},696(e){e.exports=function(e,t){if(t.styleSheet)t.styleSheet.cssText=e;else{for(;t.firstChild;)t.removeChild(t.firstChild);t.appendChild(document.createTextNode(e))}}},959(e,t,o){var a=o(559),r=o.n(a),n=o(204),i=o.n(n),l=o(672),s=o.n(l),p=o(215),d=o.n(p),c=o(691),b=o.n(c),f=o(696),h=o.n(f),u=o(851),m={};m.styleTagTransform=h(),m.setAttributes=d(),m.insert=s().bind(null,"head"),m.domAPI=i(),m.insertStyleElement=b(),r()(u.A,m),u.A&&u.A.locals&&u.A.locals}}]);