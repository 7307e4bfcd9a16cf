"""Drives Debian's MusicBrainz Picard (2.8, /usr/lib/picard) headless through its cover art download.

What runs is Picard's own: picard.coverart.CoverArt (the album metadata processor Picard runs when
a release has loaded) with its built-in "Cover Art Archive" provider (CoverArtProviderCaa), which
GETs https://coverartarchive.org/release/MBID/ (CAA_HOST, CAA_PORT) through Picard's WebService,
parses the listing, queues the image and downloads it with WebService.download, each request
following sleeve's 307 with Picard's own redirect handling, then stores the bytes in a
CoverArtImage. Nothing of Picard is changed. Stand-ins are only what Picard's UI would hold: a
QApplication for the Tagger (the attributes the web service and CoverArt read), an album object
(id, the request counter, the error and finish callbacks) and the release node Picard reads from
the MusicBrainz web service ("cover-art-archive": artwork and front true). Configuration: a fresh
config file with caa_image_size -1 ("Full size", so Picard downloads the original image), and
Picard's translations set up for English as its Tagger does at start-up.

Usage: picard_coverart.py RELEASE_MBID RELEASE_GROUP_MBID
Prints one JSON object: the images Picard stored (md5 of their bytes, types, URL) and any errors.
"""
import hashlib
import json
import os
import sys

sys.path.insert(0, os.environ.get("PICARD_LIB", "/usr/lib/picard"))

from PyQt5 import QtCore, QtWidgets  # noqa: E402

import picard  # noqa: E402,F401
from picard import config as picard_config  # noqa: E402
import picard.ui.options.cover  # noqa: E402,F401  (registers save_images_to_tags, ca_providers)
import picard.ui.options.general  # noqa: E402,F401  (registers server_host, server_port)
import picard.ui.options.network  # noqa: E402,F401  (registers the network options)
from picard.coverart import CoverArt  # noqa: E402
from picard.i18n import setup_gettext  # noqa: E402
from picard.metadata import Metadata  # noqa: E402
from picard.webservice import WebService  # noqa: E402


class Window:
    """The status bar Picard writes its download messages to."""

    def __init__(self):
        self.messages = []

    def set_statusbar_message(self, message, *args, **kwargs):
        self.messages.append(message % args[0] if args else message)


class Tagger(QtWidgets.QApplication):
    """The attributes of Picard's Tagger its web service and cover art code use."""

    tagger_stats_changed = QtCore.pyqtSignal()

    def __init__(self, argv):
        super().__init__(argv)
        self.albums = {}
        self.window = Window()
        self.cleanups = []

    def register_cleanup(self, func):
        self.cleanups.append(func)


class Album:
    """What CoverArt reads and calls of Picard's Album."""

    def __init__(self, tagger, mbid):
        self.id = mbid
        self.tagger = tagger
        self._requests = 0
        self._new_tracks = []
        self.errors = []
        self.finished = None

    def error_append(self, error):
        self.errors.append(str(error))

    def _finalize_loading(self, error):
        self.finished = {"error": error}


def main():
    release, group = sys.argv[1:3]
    app = Tagger(sys.argv[:1])
    QtCore.QObject.tagger = app
    picard_config.setup_config(app, os.path.join(os.environ["HOME"], "Picard.ini"))
    cfg = picard_config.get_config()
    cfg.setting["caa_image_size"] = -1
    # As Picard's Tagger does at start-up (the cover art messages use its translation functions).
    setup_gettext(None, "en")
    app.webservice = WebService()
    album = Album(app, release)
    app.albums[release] = album
    metadata = Metadata()
    metadata["musicbrainz_albumid"] = release
    metadata["musicbrainz_releasegroupid"] = group
    node = {"id": release, "cover-art-archive": {"artwork": True, "count": 1, "front": True, "back": False}}
    CoverArt(album, metadata, node).retrieve()
    timer = QtCore.QElapsedTimer()
    timer.start()
    while album.finished is None and timer.elapsed() < 30000:
        app.processEvents(QtCore.QEventLoop.ProcessEventsFlag.AllEvents, 50)
    images = [{"md5": hashlib.md5(i.data).hexdigest(), "types": i.types, "url": i.url.toString(), "front": i.is_front_image()} for i in metadata.images]
    print(json.dumps({"finished": album.finished, "errors": album.errors, "images": images, "messages": app.window.messages}))
    for cleanup in app.cleanups:
        cleanup()


if __name__ == "__main__":
    main()
