import csv, sys, math
import numpy as np
sys.path.insert(0, "/work/main")
from measure.served_calibration import ServingPoint, engine_seconds, wire_bytes, KEY_BYTES
from cost_models.network import wire
from cost_models.phi import shipped_or
phi = shipped_or(None)
txt = open(sys.argv[1]).read().replace("\r", "\n")
rows = [l for l in txt.splitlines() if l.count(",") == 7 and not l.startswith("kind")]
pts = []
for r in csv.reader(rows):
    k, p, v, e, n, s, cpu, _ = r
    p, v, e, n = int(p), int(v), int(e), int(n)
    pts.append(ServingPoint(k, "", p, v, e, n, float(s), float(cpu), engine_seconds(phi, k, e, v), wire_bytes(wire(KEY_BYTES, v, e), k, p)))
CH = 65536
R = {"req": lambda q: 1.0, "batch": lambda q: 1/q.pipeline, "entry": lambda q: q.entries, "byte": lambda q: q.wire_bytes,
     "chunk": lambda q: math.ceil(q.pipeline*q.wire_bytes/CH)/q.pipeline}
def go(kind, names, show=False):
    sc = [q for q in pts if q.kind == kind]
    a = np.array([[R[n](q) for n in names] for q in sc]); y = np.array([q.serving_seconds for q in sc])
    eng = np.array([q.engine_seconds for q in sc]); meas = y + eng; w = 1/meas
    c, *_ = np.linalg.lstsq(a*w[:,None], y*w, rcond=None)
    pred = a@c + eng
    acc = np.mean(1-abs(pred-meas)/meas)
    print(kind, names, [f"{x:.3g}" for x in c], f"acc {acc:.3f}")
    if show:
        for q, pr in zip(sc, pred):
            print(f"   p{q.pipeline} v{q.value_bytes} e{q.entries}: meas {q.serving_seconds*1e6:.2f} pred {(pr-q.engine_seconds)*1e6:.2f}")
for names in (["batch","byte"], ["batch","byte","chunk"], ["req","batch","byte"]):
    go("read", names)
for names in (["batch","entry","byte"], ["req","batch","entry","byte"], ["batch","entry","byte","chunk"], ["req","batch","entry","byte","chunk"], ["batch","entry","chunk"]):
    go("scan", names)
for names in (["req","batch","byte"], ["req","batch"], ["req","batch","chunk"]):
    go("write", names)
go("read", ["batch","byte"], True)
print("----")
R["copy"] = lambda q: q.wire_bytes*(1-1/q.pipeline)
for names in (["batch","entry","byte","copy"], ["req","batch","entry","byte","copy"], ["batch","byte","copy"]):
    go("scan", names)
go("read", ["batch","byte","copy"])
go("write", ["req","batch","byte","copy"])
go("scan", ["batch","entry","byte","copy"], True)
