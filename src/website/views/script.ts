/**
 * The reorder page's script, served same-origin at /static/reorder.js (the pages' CSP allows
 * scripts from 'self' only, none inline). It adds drag and drop to the list the Move buttons
 * already order without script; both keep the hidden order fields of the page's two forms.
 */
export const REORDER_SCRIPT = `'use strict';
(function () {
  var list = document.getElementById('reorder-list');
  var status = document.getElementById('reorder-status');
  if (!list) return;
  var dragged = null;
  function sync() {
    var items = list.querySelectorAll('li[data-id]');
    var ids = [];
    for (var i = 0; i < items.length; i++) ids.push(items[i].getAttribute('data-id'));
    var fields = document.querySelectorAll('input[name=order]');
    for (var j = 0; j < fields.length; j++) fields[j].value = ids.join(',');
  }
  var items = list.querySelectorAll('li[data-id]');
  for (var i = 0; i < items.length; i++) {
    var li = items[i];
    li.draggable = true;
    li.classList.add('draggable');
    li.addEventListener('dragstart', function (e) {
      dragged = e.currentTarget;
      dragged.classList.add('dragging');
      e.dataTransfer.effectAllowed = 'move';
      e.dataTransfer.setData('text/plain', dragged.getAttribute('data-id'));
    });
    li.addEventListener('dragend', function (e) {
      e.currentTarget.classList.remove('dragging');
      dragged = null;
    });
    li.addEventListener('dragover', function (e) {
      if (!dragged) return;
      e.preventDefault();
      var target = e.currentTarget;
      if (target === dragged) return;
      var box = target.getBoundingClientRect();
      var after = e.clientY > box.top + box.height / 2;
      list.insertBefore(dragged, after ? target.nextSibling : target);
    });
    li.addEventListener('drop', function (e) {
      e.preventDefault();
      sync();
      if (status) status.textContent = 'Moved. Save the order to keep it.';
    });
  }
})();
`;
