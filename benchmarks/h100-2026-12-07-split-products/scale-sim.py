# Per-tensor scales for split operands (one power of two for a whole operand, as
# copies split before their products would need) on a gradient-like operand whose
# rows' magnitudes spread over 2^±S, RN sums per 16-deep step; against an f32 FMA
# loop and f64. Error: largest |x - ref| over the largest |ref|, overall and per
# output row (a row's own scale), the worst row reported.
import numpy as np
rng=np.random.default_rng(7)
def rz(x):
    r=x.astype(np.float32); bad=np.abs(r.astype(np.float64))>np.abs(x)
    r[bad]=np.nextafter(r[bad],np.float32(0)); return r
def split(x):
    m=np.abs(x).max(); e=int(np.floor(np.log2(m))); ex=min(14-e,126)
    y=x.astype(np.float64)*2.0**ex; hi=y.astype(np.float16).astype(np.float64)
    lo=(y-hi).astype(np.float16).astype(np.float64); return hi,lo,ex
def run(m,k,n,S):
    rows=2.0**rng.uniform(-S,S,size=(m,1))
    a=(rng.standard_normal((m,k))*rows*1e-4).astype(np.float32)   # a gradient: rows of very different size
    b=rng.standard_normal((k,n)).astype(np.float32)
    ref=a.astype(np.float64)@b.astype(np.float64)
    acc=np.zeros((m,n),np.float32)
    for l in range(k):
        acc=(acc.astype(np.float64)+np.outer(a[:,l],b[l,:]).astype(np.float64)).astype(np.float32)
    ah,al,ea=split(a); bh,bl,eb=split(b); accn=np.zeros((m,n),np.float32)
    for c in range(0,k,16):
        s=slice(c,c+16)
        t=rz(al[:,s]@bh[s,:]); t=rz(t.astype(np.float64)+ah[:,s]@bl[s,:]); t=rz(t.astype(np.float64)+ah[:,s]@bh[s,:])
        accn=(accn.astype(np.float64)+t.astype(np.float64)).astype(np.float32)
    split_out=accn.astype(np.float64)*2.0**(-ea-eb)
    def errs(x):
        d=np.abs(x.astype(np.float64)-ref)
        return d.max()/np.abs(ref).max(), (d.max(axis=1)/np.abs(ref).max(axis=1)).max()
    return errs(acc), errs(split_out)
for S in [0,4,8,12,16,20]:
    (fa,fr),(sa,sr)=run(128,1024,64,S)
    print(f"rows over 2^±{S:2}: overall error f32 FMA {fa:.1e}, split {sa:.1e}; worst row's own error f32 FMA {fr:.1e}, split {sr:.1e}")
