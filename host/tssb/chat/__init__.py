"""Chats as the tinySSB Android app has them: public and private text-and-voice posts,
names, receipts, and what became of a post on its way.

  box.py       the app's cipher: one box per private message, up to 7 recipients
  appmsg.py    the app's message lists (TAV, IAM, DLV, ACK), encoded as the app reads them
  inbox.py     private posts addressed to us: opened, grouped by member set, receipts
  delivery.py  the stages a post of ours is seen to reach (store, board, neighbours, receipts)
  apphazard.py what the app throws on or drops in what we write (raw content, group members)

Reference: ../shared/reference/tinyssb-private-messages.md; choices in docs/interop.md
("Chats with the Android app").
"""
