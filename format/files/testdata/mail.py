"""Writes message.eml and archive.mbox with Python's email library (make.sh)."""
import mailbox
from email.message import EmailMessage
from email.utils import format_datetime
from datetime import datetime, timezone

def message(subject, sender, when, body, html=None):
    m = EmailMessage()
    m["Subject"] = subject
    m["From"] = sender
    m["To"] = "keepers@example.org"
    m["Date"] = format_datetime(when)
    m.set_content(body)
    if html:
        m.add_alternative(html, subtype="html")
    return m

first = message("Relief boat delayed by the swell", "Superintendent Ross <ross@example.org>",
                datetime(2024, 1, 9, 8, 30, tzinfo=timezone.utc),
                "The relief boat will not sail before Thursday: the swell at the landing stage is over three metres.\n"
                "Keep the reserve paraffin for the light and ration the coal for the range.\n",
                "<p>The relief boat will not sail before <b>Thursday</b>.</p>")
first.add_attachment(b"\x89PNG\r\n\x1a\n" + bytes(64), maintype="image", subtype="png", filename="chart.png")
with open("message.eml", "wb") as f:
    f.write(bytes(first))

box = mailbox.mbox("archive.mbox", create=True)
box.lock()
box.clear()
box.add(message("Grüße from the Flannan Isles", "=?utf-8?q?J=C3=BCrgen_M=C3=BCller?= <jm@example.org>",
                datetime(2024, 2, 1, 12, 0, tzinfo=timezone.utc),
                "The new mercury bath for the rotating lens arrived intact.\nFrom now on the clockwork is wound every forty minutes.\n"))
box.add(message("Gannets and herring", "Keeper Bain <bain@example.org>",
                datetime(2024, 2, 3, 7, 15, tzinfo=timezone.utc),
                "Gannets were diving close to the rock at dawn: the herring shoals are inshore again.\n"))
box.flush()
box.unlock()
