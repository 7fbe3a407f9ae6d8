"""WIP probe, outside the build and the tests (issue 27, step 5): boot a microVM guest to a ready runner with a preload,
snapshot it with QEMU's migration to a file, restore it in a new QEMU and time the first
result. Usage: snap.py IMAGE_DIR [preload,modules]"""
import json, os, socket, struct, subprocess, sys, time
g = sys.argv[1]
preload = [m for m in (sys.argv[2] if len(sys.argv) > 2 else "").split(",") if m]
accel = os.environ.get("ACCEL", "tcg")
khz = int(float([l for l in open('/proc/cpuinfo') if l.startswith('cpu MHz')][0].split(':')[1]) * 1000)
work = os.environ.get('WORK', '/tmp')
snap = f'{work}/airlock-vm-snap.bin'
names = ['ctl', 'out', 'err', 'sig']

def qemu(extra, tag):
    pairs = {n: socket.socketpair() for n in names}
    qmp = f'{work}/airlock-vm-qmp-{tag}.sock'
    if os.path.exists(qmp): os.unlink(qmp)
    args = ['qemu-system-x86_64', '-M', 'microvm,rtc=off' if accel == 'tcg' else 'microvm,rtc=off,pit=off,pic=off',
            '-accel', accel, '-cpu', 'max' if accel == 'tcg' else 'host',
            '-m', '1024', '-smp', '1', '-nodefaults', '-no-user-config', '-nographic', '-no-reboot',
            '-serial', f'file:{work}/airlock-vm-console-{tag}.log', '-qmp', f'unix:{qmp},server=on,wait=off',
            '-kernel', g + '/vmlinuz', '-initrd', g + '/initrd.cpio',
            '-append', f'console=ttyS0 quiet reboot=t panic=-1 tsc_early_khz={khz} tsc=reliable',
            '-drive', f'id=root,file={g}/root.erofs,format=raw,if=none,readonly=on',
            '-device', 'virtio-blk-device,drive=root', '-device', 'virtio-serial-device,max_ports=5']
    fds = []
    for i, n in enumerate(names):
        fd = pairs[n][1].fileno(); fds.append(fd)
        args += ['-chardev', f'socket,id=c{i},fd={fd}', '-device', f'virtserialport,chardev=c{i},name=airlock.{n}']
    p = subprocess.Popen(args + extra, pass_fds=fds)
    for n in names: pairs[n][1].close()
    for _ in range(500):
        if os.path.exists(qmp): break
        time.sleep(0.01)
    q = socket.socket(socket.AF_UNIX); q.connect(qmp); qf = q.makefile('rw')
    qf.readline(); cmd(qf, 'qmp_capabilities')
    return p, pairs, qf

def cmd(qf, name, **a):
    qf.write(json.dumps({'execute': name, 'arguments': a} if a else {'execute': name}) + '\n'); qf.flush()
    while True:
        r = json.loads(qf.readline())
        if 'return' in r or 'error' in r: return r

def send(ctl, o):
    b = json.dumps(o).encode(); ctl.sendall(struct.pack('<I', len(b)) + b)

def recv(ctl):
    h = b''
    while len(h) < 4:
        c = ctl.recv(4 - len(h))
        if not c: raise SystemExit('EOF on the control port')
        h += c
    n = struct.unpack('<I', h)[0]; b = b''
    while len(b) < n: b += ctl.recv(n - len(b))
    return json.loads(b)

t0 = time.time()
pa, pairs, qa = qemu([], 'a')
ctl = pairs['ctl'][0]
cfg = b''.join(s.encode() + b'\0' for s in ['uid=1000', 'nofile=1024', 'nproc=256', 'work=67108864', 'tmp=67108864',
      'env=PATH=/usr/local/bin:/usr/bin:/bin', 'env=HOME=/work', 'env=LANG=C.UTF-8', 'env=MPLBACKEND=Agg'])
ctl.sendall(struct.pack('<I', len(cfg)) + cfg)
send(ctl, {'op': 'init', 'profile': 'microvm', 'output_max': 1 << 20, 'memory_bytes': 1 << 30, 'imports': None,
           'policy': 'none', 'preload': preload, 'shell': True})
r = recv(ctl)
print(f"boot to ready runner (preload {preload}): {(time.time() - t0) * 1000:.0f} ms: {r.get('op')}, preload errors: {r.get('preload_errors')}")
t1 = time.time()
cmd(qa, 'stop')
print(cmd(qa, 'migrate', uri=f'exec:cat > {snap}'))
while True:
    s = cmd(qa, 'query-migrate')['return'].get('status')
    if s in ('completed', 'failed', 'cancelled'): break
    time.sleep(0.01)
print(f"snapshot ({s}): {(time.time() - t1) * 1000:.0f} ms, {os.path.getsize(snap) >> 20} MiB")
pa.kill(); pa.wait()

t2 = time.time()
pb, pairs, qb = qemu(['-incoming', f'exec:cat {snap}'], 'b')
while True:
    st = cmd(qb, 'query-status')['return']['status']
    if st not in ('inmigrate',): break
    time.sleep(0.005)
cmd(qb, 'cont')
t3 = time.time()
ctl = pairs['ctl'][0]
send(ctl, {'op': 'exec', 'id': '0123456789abcdef', 'language': 'python', 'code': 'import sys\nlen(sys.modules), "pandas" in sys.modules'})
while True:
    r = recv(ctl)
    if r.get('id') == '0123456789abcdef': break
t4 = time.time()
print(f"restore: incoming done {(t3 - t2) * 1000:.0f} ms; restore to first result {(t4 - t2) * 1000:.0f} ms: {r.get('status')} {r.get('result')}")
pb.kill(); pb.wait()
os.unlink(snap)
