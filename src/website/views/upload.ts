import { html, type SafeHtml } from '../../auth/pages.js';

/*
 * The upload page's HTML (docs/website.md, "Uploading on the website"). Without script it is one
 * image per submission: a file, its types (a disclosure of checkboxes, closed until opened:
 * docs/decisions.md, "Upload page: types in a disclosure"), its comment, and the edit note. The
 * page's script (upload-script.ts) turns the file field into a picker of several files, takes
 * files dropped anywhere on the page, and gives each chosen file a card of its own built from
 * the <template> below: preview, size and dimensions, types, comment, progress, Retry.
 */

export interface UploadView {
  mbid: string;
  /** Whose art: a release's or an event's, its gallery and this page's path, and what its art is called. */
  entity: 'release' | 'event';
  gallery: string;
  action: string;
  word: string;
  csrf: string;
  /** The art type names, in their order. */
  types: string[];
  /** The values shown again after a refusal. */
  row: { types: Set<string>; comment: string };
  editNote: string;
  maxBytes: number;
  commentMax: number;
  noteMax: number;
  error?: string | undefined;
}

/** A size for people: "812 kB", "4.2 MB" (decimal units, as browsers show downloads). */
function bytesText(n: number): string {
  if (n < 1000) return `${n} bytes`;
  if (n < 1_000_000) return `${Math.round(n / 1000)} kB`;
  return `${(n / 1_000_000).toFixed(1).replace(/\.0$/, '')} MB`;
}

/** The types of one image: a closed disclosure whose summary says what is chosen, opening on a grid of checkboxes. */
function typesControl(name: string, idPrefix: string, types: string[], checked: Set<string>): SafeHtml {
  const chosen = types.filter((t) => checked.has(t));
  return html`<details class="types">
<summary>Types: <span class="chosen">${chosen.length > 0 ? chosen.join(', ') : 'none chosen'}</span></summary>
<fieldset class="type-grid"><legend class="visually-hidden">Types of the image</legend>
${types.map((t, i) => html`<label class="check" for="${idPrefix}-${String(i)}"><input type="checkbox" id="${idPrefix}-${String(i)}" name="${name}" value="${t}"${checked.has(t) ? html` checked` : ''}> ${t}</label>`)}
</fieldset>
</details>`;
}

export function uploadBody(v: UploadView): SafeHtml {
  const { gallery, action } = v;
  return html`<p><a href="${gallery}">Back to the ${v.word} of ${v.entity} <code>${v.mbid}</code></a></p>
${v.error ? html`<p class="error" role="alert" tabindex="-1">${v.error}</p>` : ''}
<form method="post" enctype="multipart/form-data" action="${action}" id="add-cover-art" class="upload-form" data-max-bytes="${String(v.maxBytes)}">
<input type="hidden" name="csrf_token" value="${v.csrf}">
<div class="picker">
<label for="file-0" id="file-label">Image</label>
<p class="hint" id="file-hint">JPEG, PNG or GIF, at most ${bytesText(v.maxBytes)}.<span class="with-script" hidden> Choose several at once, or drop them anywhere on this page.</span></p>
<input type="file" id="file-0" name="file.0" accept="image/jpeg,image/png,image/gif" aria-describedby="file-hint">
</div>
<p id="drop-status" class="visually-hidden" role="status" aria-live="polite"></p>
<ul class="upload-list" id="upload-list" aria-label="Chosen images"></ul>
<fieldset class="card upload-row" id="row-0">
<legend>The image's types and comment</legend>
${typesControl('types.0', 'type-0', v.types, v.row.types)}
<label for="comment-0">Comment <span class="hint">such as “disc 2” or “obi”</span></label>
<input type="text" id="comment-0" name="comment.0" value="${v.row.comment}" maxlength="${String(v.commentMax)}">
</fieldset>
<label for="edit-note">Edit note <span class="hint">where the image comes from, for the approvers and everyone reading the edit (optional)</span></label>
<textarea id="edit-note" name="edit_note" rows="3" maxlength="${String(v.noteMax)}">${v.editNote}</textarea>
<p id="upload-message" class="upload-message" role="status" aria-live="polite"></p>
<div class="actions"><button type="submit" id="upload-button">Upload</button><a class="action" href="${gallery}">Cancel</a></div>
</form>
<form method="post" action="${action}/done" id="upload-done" hidden>
<input type="hidden" name="csrf_token" value="${v.csrf}"><input type="hidden" name="added" value="">
</form>
<template id="upload-card">
<li class="card upload-card">
<div class="upload-head"><img class="preview" alt="" width="96" height="96"><div class="upload-facts"><p class="upload-name"></p><p class="hint upload-size"></p></div></div>
${typesControl('types.0', 'card-type', v.types, new Set())}
<label class="comment-label">Comment</label>
<input type="text" class="comment" name="comment.0" maxlength="${String(v.commentMax)}">
<progress class="upload-progress" max="100" value="0"></progress>
<p class="upload-state" role="status"></p>
<div class="actions"><button type="button" class="secondary retry" hidden>Retry</button><button type="button" class="secondary remove">Remove</button></div>
</li>
</template>`;
}

/** The page's own rules, beside the site's stylesheet: nothing wider than a 360 px phone, 44 px targets, the types' grid. */
export const UPLOAD_STYLE = `main [hidden]{display:none!important}
.upload-form{display:grid;gap:.9rem;max-width:100%;min-width:0}
.upload-form *,.upload-form *::before,.upload-form *::after{box-sizing:border-box}
.upload-form label{font-weight:600}
.upload-form input[type=file]{font:inherit;width:100%;min-height:2.75rem;max-width:100%}
.upload-form input[type=text],.upload-form textarea{width:100%;max-width:100%;min-width:0}
.upload-form textarea{font:inherit;min-height:5.5rem;padding:.55rem .65rem;border:1px solid var(--field);border-radius:.4rem;background:var(--bg);color:var(--fg)}
.upload-form fieldset{min-width:0;margin:0}
.upload-row{display:grid;gap:.5rem}
.picker{display:grid;gap:.35rem}
.picker p{margin:0}
details.types{min-width:0}
details.types summary{min-height:2.75rem;display:flex;align-items:center;gap:.35rem;cursor:pointer;font-weight:600;overflow-wrap:anywhere}
details.types summary .chosen{font-weight:400}
.type-grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(9rem,1fr));gap:0 .75rem;border:0;padding:0}
label.check{display:flex;align-items:center;gap:.5rem;font-weight:400;min-height:2.75rem;min-width:2.75rem;overflow-wrap:anywhere}
label.check input{width:1.25rem;height:1.25rem;margin:0;flex:none}
.upload-list{list-style:none;margin:0;padding:0;display:grid;gap:.75rem}
.upload-list:empty{display:none}
.upload-card{display:grid;gap:.5rem;margin:0;min-width:0}
.upload-head{display:flex;gap:.75rem;align-items:flex-start;min-width:0}
.upload-head img.preview{width:6rem;height:6rem;object-fit:contain;flex:none;border:1px solid var(--line);border-radius:.25rem;background:var(--bg)}
.upload-facts{min-width:0}
.upload-facts p{margin:0 0 .25rem;overflow-wrap:anywhere}
.upload-name{font-weight:600}
.upload-progress{width:100%;height:1rem}
.upload-state{margin:0;min-height:1.5rem}
.upload-card.failed{border-color:var(--error)}
.upload-card.failed .upload-state{color:var(--error)}
.upload-card.done{border-color:var(--ok)}
.upload-message{margin:0}
body.dragging main{outline:3px dashed var(--accent);outline-offset:-3px}
`;
