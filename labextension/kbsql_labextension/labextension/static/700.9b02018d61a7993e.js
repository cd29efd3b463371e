"use strict";(self.rspackChunkkbsql_labextension=self.rspackChunkkbsql_labextension||[]).push([[700],{646(e,r,t){var o=t(601),n=t.n(o),a=t(314),i=(t.n(a))()(n());i.push([e.id,`/* The toolbar button shows its label ("%%kbsql") in the editor's monospace font. */
.kbsql-InsertCellButton .jp-ToolbarButtonComponent-label {
  font-family: var(--jp-code-font-family);
}

.kbsql-Sidebar {
  display: flex;
  flex-direction: column;
  background: var(--jp-layout-color1);
  color: var(--jp-ui-font-color1);
  font-size: var(--jp-ui-font-size1);
  padding: 8px;
  gap: 6px;
  overflow: auto;
}

.kbsql-Sidebar-form {
  display: flex;
  gap: 4px;
}

.kbsql-Sidebar-url {
  flex: 1;
  min-width: 0;
  font-size: var(--jp-ui-font-size1);
}

.kbsql-Sidebar-status {
  color: var(--jp-ui-font-color2);
  overflow-wrap: anywhere;
}

.kbsql-Sidebar-status[data-state='error'] {
  color: var(--jp-error-color1);
}

.kbsql-Sidebar-project h3 {
  font-size: var(--jp-ui-font-size1);
  font-weight: 600;
  margin: 8px 0 4px;
  text-transform: uppercase;
  color: var(--jp-ui-font-color2);
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

.kbsql-Sidebar-badge {
  font-size: var(--jp-ui-font-size0);
  padding: 0 4px;
  border-radius: 2px;
  background: var(--jp-brand-color3);
  color: var(--jp-ui-font-color0);
}

.kbsql-Sidebar-agent .kbsql-Sidebar-badge {
  background: var(--jp-accent-color3);
}

.kbsql-Sidebar-name {
  font-family: var(--jp-code-font-family);
}

.kbsql-Sidebar-detail,
.kbsql-Sidebar-empty {
  color: var(--jp-ui-font-color2);
  overflow: hidden;
  text-overflow: ellipsis;
  white-space: nowrap;
}
`,""]),t.d(r,{},{A:i})},314(e){e.exports=function(e){var r=[];return r.toString=function(){return this.map(function(r){var t="",o=void 0!==r[5];return r[4]&&(t+="@supports (".concat(r[4],") {")),r[2]&&(t+="@media ".concat(r[2]," {")),o&&(t+="@layer".concat(r[5].length>0?" ".concat(r[5]):""," {")),t+=e(r),o&&(t+="}"),r[2]&&(t+="}"),r[4]&&(t+="}"),t}).join("")},r.i=function(e,t,o,n,a){"string"==typeof e&&(e=[[null,e,void 0]]);var i={};if(o)for(var s=0;s<this.length;s++){var l=this[s][0];null!=l&&(i[l]=!0)}for(var c=0;c<e.length;c++){var p=[].concat(e[c]);o&&i[p[0]]||(void 0!==a&&(void 0===p[5]||(p[1]="@layer".concat(p[5].length>0?" ".concat(p[5]):""," {").concat(p[1],"}")),p[5]=a),t&&(p[2]&&(p[1]="@media ".concat(p[2]," {").concat(p[1],"}")),p[2]=t),n&&(p[4]?(p[1]="@supports (".concat(p[4],") {").concat(p[1],"}"),p[4]=n):p[4]="".concat(n)),r.push(p))}},r}},601(e){e.exports=function(e){return e[1]}},72(e){var r=[];function t(e){for(var t=-1,o=0;o<r.length;o++)if(r[o].identifier===e){t=o;break}return t}function o(e,o){for(var n={},a=[],i=0;i<e.length;i++){var s=e[i],l=o.base?s[0]+o.base:s[0],c=n[l]||0,p="".concat(l," ").concat(c);n[l]=c+1;var u=t(p),d={css:s[1],media:s[2],sourceMap:s[3],supports:s[4],layer:s[5]};if(-1!==u)r[u].references++,r[u].updater(d);else{var f=function(e,r){var t=r.domAPI(r);return t.update(e),function(r){r?(r.css!==e.css||r.media!==e.media||r.sourceMap!==e.sourceMap||r.supports!==e.supports||r.layer!==e.layer)&&t.update(e=r):t.remove()}}(d,o);o.byIndex=i,r.splice(i,0,{identifier:p,updater:f,references:1})}a.push(p)}return a}e.exports=function(e,n){var a=o(e=e||[],n=n||{});return function(e){e=e||[];for(var i=0;i<a.length;i++){var s=t(a[i]);r[s].references--}for(var l=o(e,n),c=0;c<a.length;c++){var p=t(a[c]);0===r[p].references&&(r[p].updater(),r.splice(p,1))}a=l}}},659(e){var r={};e.exports=function(e,t){var o=function(e){if(void 0===r[e]){var t=document.querySelector(e);if(window.HTMLIFrameElement&&t instanceof window.HTMLIFrameElement)try{t=t.contentDocument.head}catch(e){t=null}r[e]=t}return r[e]}(e);if(!o)throw Error("Couldn't find a style target. This probably means that the value for the 'insert' parameter is invalid.");o.appendChild(t)}},540(e){e.exports=function(e){var r=document.createElement("style");return e.setAttributes(r,e.attributes),e.insert(r,e.options),r}},56(e,r,t){e.exports=function(e){var r=t.nc;r&&e.setAttribute("nonce",r)}},206(e){e.exports=function(e){if("u"<typeof document)return{update:function(){},remove:function(){}};var r=e.insertStyleElement(e);return{update:function(t){var o,n,a;o="",t.supports&&(o+="@supports (".concat(t.supports,") {")),t.media&&(o+="@media ".concat(t.media," {")),(n=void 0!==t.layer)&&(o+="@layer".concat(t.layer.length>0?" ".concat(t.layer):""," {")),o+=t.css,n&&(o+="}"),t.media&&(o+="}"),t.supports&&(o+="}"),(a=t.sourceMap)&&"u">typeof btoa&&(o+="\n/*# sourceMappingURL=data:application/json;base64,".concat(btoa(unescape(encodeURIComponent(JSON.stringify(a))))," */")),e.styleTagTransform(o,r,e.options)},remove:function(){var e;null===(e=r).parentNode||e.parentNode.removeChild(e)}}}},113(e){e.exports=function(e,r){if(r.styleSheet)r.styleSheet.cssText=e;else{for(;r.firstChild;)r.removeChild(r.firstChild);r.appendChild(document.createTextNode(e))}}},959(e,r,t){var o=t(72),n=t.n(o),a=t(206),i=t.n(a),s=t(659),l=t.n(s),c=t(56),p=t.n(c),u=t(540),d=t.n(u),f=t(113),b=t.n(f),v=t(646),m={};m.styleTagTransform=b(),m.setAttributes=p(),m.insert=l().bind(null,"head"),m.domAPI=i(),m.insertStyleElement=d(),n()(v.A,m),v.A&&v.A.locals&&v.A.locals}}]);