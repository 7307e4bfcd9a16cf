"""Drives Debian's MusicBrainz Picard (2.8, /usr/lib/picard) headless through its own sign-in.

Nothing of Picard is changed: its modules are imported as they are, a QApplication stands in for
the Tagger (the attributes Picard's web service reads of it), and only Picard's configuration
(server_host, server_port in a fresh config file) and environment (HOME, QT_QPA_PLATFORM) are set.

Protocol, one JSON object per line on stdout:
  -> {"authorization_url": URL}      the URL Picard opens in the user's browser
  <- the code, one line on stdin     what the user pastes into Picard's dialog
  -> {"exchanged": ..., "username": ..., "logged_in": ..., "access_token": ..., ...}
  <- "refresh"                       after the caller revoked the refresh token
  -> {"access_token": ..., "authorized": ...}   whether Picard forgot it on invalid_grant
"""
import json
import os
import sys

sys.path.insert(0, os.environ.get("PICARD_LIB", "/usr/lib/picard"))

from PyQt5 import QtCore, QtWidgets  # noqa: E402

import picard  # noqa: E402,F401
from picard import config as picard_config  # noqa: E402
import picard.ui.options.general  # noqa: E402,F401  (registers server_host, server_port, oauth_*)
import picard.ui.options.network  # noqa: E402,F401  (registers the network options)
from picard.webservice import WebService  # noqa: E402

SCOPES = "profile tag rating collection submit_isrc submit_barcode"


class Tagger(QtWidgets.QApplication):
    """The attributes of Picard's Tagger its web service uses."""

    tagger_stats_changed = QtCore.pyqtSignal()


def say(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def wait_for(app, box, key, timeout_ms=20000):
    """Runs Qt's event loop until box[key] is set (or the time is up)."""
    timer = QtCore.QElapsedTimer()
    timer.start()
    while key not in box and timer.elapsed() < timeout_ms:
        app.processEvents(QtCore.QEventLoop.ProcessEventsFlag.AllEvents, 50)
    return box.get(key)


def main():
    app = Tagger(sys.argv[:1])
    QtCore.QObject.tagger = app
    picard_config.setup_config(app, os.path.join(os.environ["HOME"], "Picard.ini"))
    cfg = picard_config.get_config()
    cfg.setting["server_host"] = sys.argv[1]
    cfg.setting["server_port"] = int(sys.argv[2])
    ws = WebService()
    oauth = ws.oauth_manager
    box = {}

    say({"authorization_url": oauth.get_authorization_url(SCOPES)})
    code = sys.stdin.readline().strip()

    oauth.exchange_authorization_code(code, SCOPES, lambda successful, error_msg: box.update(exchanged=(successful, error_msg)))
    exchanged = wait_for(app, box, "exchanged")
    first_token = oauth.access_token
    oauth.fetch_username(lambda successful, error_msg: box.update(username=(successful, error_msg)))
    username = wait_for(app, box, "username")
    # Picard keeps an access token until 60 s before it expires: with a 60 s token that is now,
    # so the next request refreshes it first.
    oauth.get_access_token(lambda access_token: box.update(refreshed=access_token))
    refreshed = wait_for(app, box, "refreshed")
    say({
        "exchanged": exchanged,
        "username_fetched": username,
        "username": oauth.username,
        "logged_in": oauth.is_logged_in(),
        "first_access_token": first_token,
        "access_token": refreshed,
        "refresh_token": oauth.refresh_token,
        "scopes": oauth.refresh_token_scopes,
    })

    if sys.stdin.readline().strip() == "refresh":
        oauth.forget_access_token()
        oauth.get_access_token(lambda access_token: box.update(again=access_token))
        again = wait_for(app, box, "again")
        say({"access_token": again, "refresh_token": oauth.refresh_token, "authorized": oauth.is_authorized()})


if __name__ == "__main__":
    main()
