"""The Cover Art Archive clients of Debian's python3-musicbrainzngs and beets, unchanged, against
https://coverartarchive.org (which the caller's /etc/hosts and trusted CAs point at sleeve).

Usage: caa_clients.py RELEASE_MBID RELEASE_GROUP_MBID OUT_DIR
Prints one JSON object: what each client got.
"""
import json
import os
import sys

release, group, out_dir = sys.argv[1:4]
result = {}

# musicbrainzngs: its CAA module as shipped (hostname coverartarchive.org, https).
import musicbrainzngs  # noqa: E402

musicbrainzngs.set_useragent("sleeve-test", "1.0", "https://example.invalid")
listing = musicbrainzngs.get_image_list(release)
front = musicbrainzngs.get_image_front(release, size="250")
result["musicbrainzngs"] = {
    "release": listing["release"],
    "types": listing["images"][0]["types"],
    "front_250_jpeg": front[:3] == b"\xff\xd8\xff",
    "front_250_bytes": len(front),
}

# beets: the fetchart plugin with its `coverart` source only, for an album with these MBIDs.
sys.path.insert(0, "/usr/share/beets")
from beets import config, library  # noqa: E402
from beetsplug.fetchart import FetchArtPlugin  # noqa: E402

config["fetchart"]["sources"] = ["coverart"]
plugin = FetchArtPlugin()
lib = library.Library(os.path.join(out_dir, "beets.db"), out_dir)
album = library.Album(lib, album="Through the front door", albumartist="sleeve", mb_albumid=release, mb_releasegroupid=group)
candidate = plugin.art_for_album(album, [])
path = candidate.path.decode() if candidate is not None else None
with open(path, "rb") if path else open(os.devnull, "rb") as f:
    head = f.read(3)
result["beets"] = {"url": candidate.url if candidate else None, "path": path, "jpeg": head == b"\xff\xd8\xff"}

print(json.dumps(result))
