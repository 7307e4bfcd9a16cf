/** The one stylesheet of the website pages, served at /static/sleeve.css. Small, no external assets. */
export const STYLESHEET = `:root{color-scheme:light dark;--fg:#1d1d1f;--bg:#fff;--muted:#5f6368;--line:#d9d9de;--field:#6e6e78;--accent:#a33a6b;--accent-fg:#fff;--error:#b3261e;--ok:#1b6e3a}
@media (prefers-color-scheme:dark){:root{--fg:#ececf1;--bg:#17171a;--muted:#a0a0aa;--line:#3a3a42;--field:#9a9aa6;--accent:#e07aa8;--accent-fg:#17171a;--error:#f2b8b5;--ok:#9ad6a9}}
*{box-sizing:border-box}
html{font:16px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg)}
body{margin:0}
header{border-bottom:1px solid var(--line);padding:.6rem 1rem;display:flex;gap:1rem;align-items:center;flex-wrap:wrap}
header .brand{font-weight:700;color:var(--fg);text-decoration:none;min-height:2.75rem;display:inline-flex;align-items:center}
header nav{margin-left:auto;display:flex;gap:1rem;align-items:center}
header nav a{min-height:2.75rem;min-width:2.75rem;display:inline-flex;align-items:center}
main{max-width:44rem;margin:0 auto;padding:1.25rem 1rem 3rem}
h1{font-size:1.5rem;margin:.5rem 0 1rem}
h2{font-size:1.15rem;margin:2rem 0 .5rem}
a{color:var(--accent)}
p.muted,.muted{color:var(--muted)}
form.stack{display:grid;gap:.9rem;max-width:26rem}
label{display:grid;gap:.25rem;font-weight:600}
label span.hint{font-weight:400;color:var(--muted);font-size:.9rem}
label.check{grid-template-columns:auto 1fr;align-items:start;column-gap:.5rem}
label.check input{width:2.75rem;height:2.75rem;margin:0;flex:none}
label.check span.hint{grid-column:2}
input[type=text],input[type=password],input[type=url],select{font:inherit;min-height:2.75rem;padding:.55rem .65rem;border:1px solid var(--field);border-radius:.4rem;background:var(--bg);color:var(--fg);width:100%}
input:focus-visible,select:focus-visible,button:focus-visible,a:focus-visible{outline:3px solid var(--accent);outline-offset:2px}
button{font:inherit;min-height:2.75rem;min-width:2.75rem;padding:.55rem 1rem;border-radius:.4rem;border:1px solid var(--accent);background:var(--accent);color:var(--accent-fg);cursor:pointer}
button.secondary{background:transparent;color:var(--accent)}
button.link{border:0;background:none;color:var(--accent);padding:0 .25rem;text-decoration:underline}
button.danger{border-color:var(--error);background:var(--error);color:var(--bg)}
a.action{min-height:2.75rem;min-width:2.75rem;display:inline-flex;align-items:center;padding:0 .25rem}
.actions{display:flex;gap:.75rem;flex-wrap:wrap;align-items:center}
.error{color:var(--error);border-left:4px solid var(--error);padding:.4rem .75rem;margin:1rem 0}
.notice{color:var(--ok);border-left:4px solid var(--ok);padding:.4rem .75rem;margin:1rem 0}
ul.scopes{padding-left:1.25rem}
.caution{border-left:4px solid var(--error);padding:.1rem .75rem;margin:1rem 0}
code{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;background:rgba(127,127,127,.15);padding:.05rem .3rem;border-radius:.25rem;word-break:break-all}
.card{border:1px solid var(--line);border-radius:.5rem;padding:.9rem 1rem;margin:.75rem 0}
.card h3{margin:0 0 .35rem;font-size:1.05rem}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.2rem .8rem;margin:.5rem 0}
dt{color:var(--muted)}
dd{margin:0;min-width:0}
form.inline{display:inline}
.visually-hidden{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap}
ol.gallery,ul.recent,ol.reorder,ul.releases{list-style:none;padding:0;margin:1rem 0}
ol.gallery{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,18rem),1fr));gap:1rem}
li.art{border:1px solid var(--line);border-radius:.5rem;padding:.75rem;min-width:0}
li.art h2{font-size:1.05rem;margin:.5rem 0 .25rem}
li.art img,.group-cover img,.edit-preview img{display:block;max-width:100%;height:auto;border-radius:.25rem}
li.art a.thumb{display:block}
li.art dl{grid-template-columns:max-content minmax(0,1fr);font-size:.95rem}
dd.files a{display:inline-flex;align-items:center;min-height:2.75rem;min-width:2.75rem;margin-right:.75rem}
.role{margin:.25rem 0}
ul.recent{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(45%,9rem),1fr));gap:.75rem}
ul.recent a{display:grid;gap:.25rem;text-decoration:none;overflow-wrap:anywhere}
ul.recent img{width:100%;height:auto;aspect-ratio:1;object-fit:cover;border-radius:.25rem}
ul.releases li{margin:.35rem 0}
.group-cover{margin:0}
.group-cover img{max-width:min(100%,30rem)}
.edit-preview img{max-width:10rem}
fieldset{border:1px solid var(--line);border-radius:.4rem;padding:.5rem .9rem;margin:0;min-width:0}
legend{font-weight:600;padding:0 .25rem}
fieldset.types{display:grid;grid-template-columns:repeat(auto-fill,minmax(9rem,1fr));gap:0 .5rem}
label.check,label.choice{display:flex;gap:.5rem;align-items:center;font-weight:400;min-height:2.75rem}
input[type=checkbox],input[type=radio]{width:1.25rem;height:1.25rem;accent-color:var(--accent)}
label.choice img{width:4rem;height:4rem;object-fit:cover;border-radius:.25rem}
ol.reorder li{display:flex;gap:.75rem;align-items:center;flex-wrap:wrap;border:1px solid var(--line);border-radius:.5rem;padding:.5rem;margin:.5rem 0;background:var(--bg)}
ol.reorder li img{width:4.5rem;height:4.5rem;object-fit:cover;border-radius:.25rem}
ol.reorder .reorder-label{flex:1 1 8rem;min-width:0;overflow-wrap:anywhere}
ol.reorder .reorder-moves{display:flex;gap:.5rem}
ol.reorder li.draggable{cursor:grab}
ol.reorder li.dragging{opacity:.5}
ol.edits{list-style:none;padding:0;margin:1rem 0}
ol.edits li{border-top:1px solid var(--line);padding:.5rem 0;overflow-wrap:anywhere}
ol.order{margin:0;padding-left:1.5rem}
.decide{margin:1rem 0;max-width:26rem}
`;
