/**
 * The upload page's script, served same-origin at /static/add-cover-art.js (the page's CSP
 * allows scripts from 'self' only, none inline). Without it the page sends one image per
 * submission. With it: several files from the picker or dropped anywhere on the page, each a
 * card (preview, size, dimensions, its own types and comment); Upload sends them one request
 * each, in turn (Accept: application/json, so the answer is JSON, not the redirect), with a
 * progress bar each and Retry on a failed one; the batch's edit note goes with every one. Once
 * every card is uploaded, the page posts the ids to …/add-cover-art/done, which redirects to
 * the gallery with the notice (Post/Redirect/Get, as without script).
 */
export const UPLOAD_SCRIPT = `'use strict';
(function () {
  var form = document.getElementById('add-cover-art');
  if (!form || !window.FormData || !window.XMLHttpRequest || !window.URL || !('content' in document.createElement('template'))) return;
  var list = document.getElementById('upload-list');
  var template = document.getElementById('upload-card');
  var picker = document.getElementById('file-0');
  var row = document.getElementById('row-0');
  var message = document.getElementById('upload-message');
  var dropStatus = document.getElementById('drop-status');
  var button = document.getElementById('upload-button');
  var done = document.getElementById('upload-done');
  var maxBytes = Number(form.getAttribute('data-max-bytes')) || Infinity;
  var accepted = { 'image/jpeg': 1, 'image/png': 1, 'image/gif': 1 };
  var cards = [];
  var serial = 0;
  var busy = false;

  // With script: the picker takes several files, the single row's fields go (each card has its own).
  picker.multiple = true;
  picker.removeAttribute('name');
  document.getElementById('file-label').textContent = 'Images';
  var more = form.querySelector('.with-script');
  if (more) more.hidden = false;
  row.hidden = true;
  Array.prototype.forEach.call(row.querySelectorAll('input'), function (input) { input.disabled = true; });

  function size(n) {
    if (n < 1000) return n + ' bytes';
    if (n < 1000000) return Math.round(n / 1000) + ' kB';
    return (n / 1000000).toFixed(1).replace(/\\.0$/, '') + ' MB';
  }

  function setState(card, text, kind) {
    card.el.querySelector('.upload-state').textContent = text;
    card.el.classList.toggle('failed', kind === 'failed');
    card.el.classList.toggle('done', kind === 'done');
    card.el.querySelector('.retry').hidden = !(kind === 'failed' && card.retry);
    card.el.querySelector('.remove').hidden = kind === 'done' || kind === 'sending';
  }

  function summarise(card) {
    var chosen = [];
    Array.prototype.forEach.call(card.el.querySelectorAll('.type-grid input:checked'), function (box) { chosen.push(box.value); });
    card.el.querySelector('.chosen').textContent = chosen.length ? chosen.join(', ') : 'none chosen';
  }

  function addFile(file) {
    var n = ++serial;
    var el = template.content.firstElementChild.cloneNode(true);
    var card = { el: el, file: file, state: 'ready', retry: true, result: null };
    el.id = 'upload-' + n;
    el.querySelector('.upload-name').textContent = file.name;
    el.querySelector('.upload-size').textContent = size(file.size);
    var img = el.querySelector('img.preview');
    img.alt = 'Preview of ' + file.name;
    Array.prototype.forEach.call(el.querySelectorAll('.type-grid input'), function (box, i) {
      box.removeAttribute('name');
      box.id = 'upload-' + n + '-type-' + i;
      box.parentNode.setAttribute('for', box.id);
      box.addEventListener('change', function () { summarise(card); });
    });
    el.querySelector('.type-grid legend').textContent = 'Types of ' + file.name;
    var comment = el.querySelector('input.comment');
    comment.removeAttribute('name');
    comment.id = 'upload-' + n + '-comment';
    el.querySelector('.comment-label').setAttribute('for', comment.id);
    var bar = el.querySelector('progress');
    bar.setAttribute('aria-label', 'Upload of ' + file.name);
    el.querySelector('.retry').addEventListener('click', function () { send([card]); });
    el.querySelector('.retry').setAttribute('aria-label', 'Retry ' + file.name);
    el.querySelector('.remove').setAttribute('aria-label', 'Remove ' + file.name);
    el.querySelector('.remove').addEventListener('click', function () {
      cards.splice(cards.indexOf(card), 1);
      el.remove();
      URL.revokeObjectURL(img.src);
      picker.focus();
      finishIfDone();
    });
    list.appendChild(el);
    cards.push(card);
    if (!accepted[file.type]) {
      card.state = 'failed';
      card.retry = false;
      setState(card, 'Not a JPEG, PNG or GIF image: remove it.', 'failed');
      return;
    }
    if (file.size > maxBytes) {
      card.state = 'failed';
      card.retry = false;
      setState(card, 'Larger than the limit of ' + size(maxBytes) + ': remove it.', 'failed');
      return;
    }
    img.addEventListener('load', function () {
      el.querySelector('.upload-size').textContent = size(file.size) + ' · ' + img.naturalWidth + ' × ' + img.naturalHeight + ' px';
    });
    img.addEventListener('error', function () {
      el.querySelector('.upload-size').textContent = size(file.size) + ' · no preview';
    });
    img.src = URL.createObjectURL(file);
    setState(card, 'Ready to upload.', 'ready');
  }

  function addFiles(files) {
    for (var i = 0; i < files.length; i++) addFile(files[i]);
    if (files.length) dropStatus.textContent = files.length === 1 ? '1 image added to the list.' : files.length + ' images added to the list.';
  }

  picker.addEventListener('change', function () {
    addFiles(picker.files);
    picker.value = '';
  });

  // Files dropped anywhere on the page.
  var depth = 0;
  function hasFiles(e) {
    return e.dataTransfer && Array.prototype.indexOf.call(e.dataTransfer.types || [], 'Files') !== -1;
  }
  document.addEventListener('dragenter', function (e) {
    if (!hasFiles(e)) return;
    depth++;
    document.body.classList.add('dragging');
  });
  document.addEventListener('dragleave', function () {
    depth = Math.max(0, depth - 1);
    if (depth === 0) document.body.classList.remove('dragging');
  });
  document.addEventListener('dragover', function (e) {
    if (!hasFiles(e)) return;
    e.preventDefault();
    e.dataTransfer.dropEffect = 'copy';
  });
  document.addEventListener('drop', function (e) {
    depth = 0;
    document.body.classList.remove('dragging');
    if (!e.dataTransfer || !e.dataTransfer.files || !e.dataTransfer.files.length) return;
    e.preventDefault();
    addFiles(e.dataTransfer.files);
  });

  function answer(xhr) {
    try { return JSON.parse(xhr.responseText); } catch (err) { return null; }
  }

  function upload(card, next) {
    var data = new FormData();
    data.append('csrf_token', form.elements.csrf_token.value);
    data.append('edit_note', document.getElementById('edit-note').value);
    Array.prototype.forEach.call(card.el.querySelectorAll('.type-grid input:checked'), function (box) { data.append('types.0', box.value); });
    data.append('comment.0', card.el.querySelector('input.comment').value);
    data.append('file.0', card.file, card.file.name);
    var bar = card.el.querySelector('progress');
    bar.value = 0;
    card.state = 'sending';
    setState(card, 'Uploading…', 'sending');
    var xhr = new XMLHttpRequest();
    xhr.open('POST', form.action);
    xhr.setRequestHeader('Accept', 'application/json');
    xhr.upload.addEventListener('progress', function (e) {
      if (e.lengthComputable) bar.value = Math.round((e.loaded / e.total) * 100);
    });
    xhr.addEventListener('load', function () {
      var body = answer(xhr);
      if (xhr.status === 201 && body && body.image) {
        bar.value = 100;
        card.state = 'done';
        card.result = body.image;
        setState(card, body.notice || 'Added.', 'done');
      } else {
        card.state = 'failed';
        // A refusal of the file itself is final; a full server or an expired form may pass on a retry.
        card.retry = xhr.status === 429 || xhr.status >= 500;
        setState(card, (body && body.error_description) || 'The upload failed (' + xhr.status + ').', 'failed');
      }
      next();
    });
    xhr.addEventListener('error', function () {
      card.state = 'failed';
      card.retry = true;
      setState(card, 'The upload failed: the connection was lost.', 'failed');
      next();
    });
    xhr.send(data);
  }

  function send(batch) {
    if (busy) return;
    busy = true;
    button.disabled = true;
    message.textContent = 'Uploading…';
    var i = 0;
    (function next() {
      while (i < batch.length && batch[i].state === 'done') i++;
      if (i < batch.length && batch[i].state === 'failed' && !batch[i].retry) { i++; return next(); }
      if (i < batch.length) return upload(batch[i++], next);
      busy = false;
      button.disabled = false;
      var failed = cards.filter(function (c) { return c.state === 'failed'; }).length;
      message.textContent = failed ? (failed === 1 ? '1 image was not added: retry it or remove it.' : failed + ' images were not added: retry them or remove them.') : '';
      finishIfDone();
    })();
  }

  // Every card uploaded: the gallery, with the notice, through a form post (Post/Redirect/Get).
  function finishIfDone() {
    if (busy || !cards.length || cards.some(function (c) { return c.state !== 'done'; })) return;
    done.elements.added.value = cards.map(function (c) { return c.result.id; }).join(',');
    message.textContent = 'All images added; opening the gallery…';
    done.submit();
  }

  form.addEventListener('submit', function (event) {
    event.preventDefault();
    if (!cards.length) {
      message.textContent = 'Choose at least one image.';
      picker.focus();
      return;
    }
    send(cards.slice());
  });
})();
`;
