"use strict";(self.rspackChunkkbsql_labextension=self.rspackChunkkbsql_labextension||[]).push([[700],{646(e,t,r){var o=r(601),a=r.n(o),n=r(314),i=(r.n(n))()(a());i.push([e.id,`/* The toolbar button shows its label ("%%kbsql") in the editor's monospace font. */
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

.kbsql-Sidebar-status,
.kbsql-Chat-note {
  color: var(--jp-ui-font-color2);
  overflow-wrap: anywhere;
}

.kbsql-Sidebar-status[data-state='error'],
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
  color: var(--jp-ui-font-color2);
  font-size: var(--jp-ui-font-size0);
}

.kbsql-Sidebar-hitText {
  display: -webkit-box;
  -webkit-line-clamp: 3;
  -webkit-box-orient: vertical;
  overflow: hidden;
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

.kbsql-Sidebar-item {
  display: flex;
  align-items: baseline;
  gap: 6px;
  width: 100%;
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

.kbsql-Sidebar-name {
  font-family: var(--jp-code-font-family);
}

.kbsql-Sidebar-counts {
  margin-left: auto;
  color: var(--jp-ui-font-color2);
  white-space: nowrap;
}

.kbsql-Sidebar-details {
  display: grid;
  grid-template-columns: auto 1fr;
  gap: 0 8px;
  margin: 0 0 4px 12px;
  color: var(--jp-ui-font-color2);
  font-size: var(--jp-ui-font-size0);
}

.kbsql-Sidebar-details dt {
  font-weight: 600;
}

.kbsql-Sidebar-details dd {
  margin: 0;
  overflow-wrap: anywhere;
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
  padding-left: 6px;
}

.kbsql-Chat-you {
  font-weight: 600;
  white-space: pre-wrap;
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

.kbsql-Chat-answer {
  background: var(--jp-layout-color2);
  padding: 4px 6px;
  border-radius: 2px;
}

.kbsql-Chat-answerText {
  white-space: pre-wrap;
  margin-bottom: 4px;
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
`,""]),r.d(t,{},{A:i})},314(e){e.exports=function(e){var t=[];return t.toString=function(){return this.map(function(t){var r="",o=void 0!==t[5];return t[4]&&(r+="@supports (".concat(t[4],") {")),t[2]&&(r+="@media ".concat(t[2]," {")),o&&(r+="@layer".concat(t[5].length>0?" ".concat(t[5]):""," {")),r+=e(t),o&&(r+="}"),t[2]&&(r+="}"),t[4]&&(r+="}"),r}).join("")},t.i=function(e,r,o,a,n){"string"==typeof e&&(e=[[null,e,void 0]]);var i={};if(o)for(var l=0;l<this.length;l++){var s=this[l][0];null!=s&&(i[s]=!0)}for(var p=0;p<e.length;p++){var d=[].concat(e[p]);o&&i[d[0]]||(void 0!==n&&(void 0===d[5]||(d[1]="@layer".concat(d[5].length>0?" ".concat(d[5]):""," {").concat(d[1],"}")),d[5]=n),r&&(d[2]&&(d[1]="@media ".concat(d[2]," {").concat(d[1],"}")),d[2]=r),a&&(d[4]?(d[1]="@supports (".concat(d[4],") {").concat(d[1],"}"),d[4]=a):d[4]="".concat(a)),t.push(d))}},t}},601(e){e.exports=function(e){return e[1]}},72(e){var t=[];function r(e){for(var r=-1,o=0;o<t.length;o++)if(t[o].identifier===e){r=o;break}return r}function o(e,o){for(var a={},n=[],i=0;i<e.length;i++){var l=e[i],s=o.base?l[0]+o.base:l[0],p=a[s]||0,d="".concat(s," ").concat(p);a[s]=p+1;var c=r(d),b={css:l[1],media:l[2],sourceMap:l[3],supports:l[4],layer:l[5]};if(-1!==c)t[c].references++,t[c].updater(b);else{var f=function(e,t){var r=t.domAPI(t);return r.update(e),function(t){t?(t.css!==e.css||t.media!==e.media||t.sourceMap!==e.sourceMap||t.supports!==e.supports||t.layer!==e.layer)&&r.update(e=t):r.remove()}}(b,o);o.byIndex=i,t.splice(i,0,{identifier:d,updater:f,references:1})}n.push(d)}return n}e.exports=function(e,a){var n=o(e=e||[],a=a||{});return function(e){e=e||[];for(var i=0;i<n.length;i++){var l=r(n[i]);t[l].references--}for(var s=o(e,a),p=0;p<n.length;p++){var d=r(n[p]);0===t[d].references&&(t[d].updater(),t.splice(d,1))}n=s}}},659(e){var t={};e.exports=function(e,r){var o=function(e){if(void 0===t[e]){var r=document.querySelector(e);if(window.HTMLIFrameElement&&r instanceof window.HTMLIFrameElement)try{r=r.contentDocument.head}catch(e){r=null}t[e]=r}return t[e]}(e);if(!o)throw Error("Couldn't find a style target. This probably means that the value for the 'insert' parameter is invalid.");o.appendChild(r)}},540(e){e.exports=function(e){var t=document.createElement("style");return e.setAttributes(t,e.attributes),e.insert(t,e.options),t}},56(e,t,r){e.exports=function(e){var t=r.nc;t&&e.setAttribute("nonce",t)}},825(e){e.exports=function(e){if("u"<typeof document)return{update:function(){},remove:function(){}};var t=e.insertStyleElement(e);return{update:function(r){var o,a,n;o="",r.supports&&(o+="@supports (".concat(r.supports,") {")),r.media&&(o+="@media ".concat(r.media," {")),(a=void 0!==r.layer)&&(o+="@layer".concat(r.layer.length>0?" ".concat(r.layer):""," {")),o+=r.css,a&&(o+="}"),r.media&&(o+="}"),r.supports&&(o+="}"),(n=r.sourceMap)&&"u">typeof btoa&&(o+="\n/*# sourceMappingURL=data:application/json;base64,".concat(btoa(unescape(encodeURIComponent(JSON.stringify(n))))," */")),e.styleTagTransform(o,t,e.options)},remove:function(){var e;null===(e=t).parentNode||e.parentNode.removeChild(e)}}}},113(e){e.exports=function(e,t){if(t.styleSheet)t.styleSheet.cssText=e;else{for(;t.firstChild;)t.removeChild(t.firstChild);t.appendChild(document.createTextNode(e))}}},959(e,t,r){var o=r(72),a=r.n(o),n=r(825),i=r.n(n),l=r(659),s=r.n(l),p=r(56),d=r.n(p),c=r(540),b=r.n(c),f=r(113),u=r.n(f),h=r(646),v={};v.styleTagTransform=u(),v.setAttributes=d(),v.insert=s().bind(null,"head"),v.domAPI=i(),v.insertStyleElement=b(),a()(h.A,v),h.A&&h.A.locals&&h.A.locals}}]);