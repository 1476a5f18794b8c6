# Two CPU simulations of split f32 products: `split_sim.py` (the sums' rounding,
# raw/rounding-sim.txt) and `split_sim.py scale` (one scale per operand,
# raw/scale-sim.txt).
# Simulates the split product's rounding: f16 halves, products exact, f32 sums
# rounded toward zero per 16-deep MMA (RZ, as Ootomo & Yokota measured on NVIDIA
# tensor cores) or per MMA chain then added round-to-nearest (RN), against an f32
# FMA loop and an f64 reference. Operands as in split_precision_products_keep_f32_accuracy.
import sys
import numpy as np
rng=np.random.default_rng(7)
def spread(n, seed, scale):
    M=(1<<64)-1; s=(seed*6364136223846793005+1442695040888963407)&M; out=np.empty(n)
    for i in range(n):
        s=(s*6364136223846793005+1442695040888963407)&M
        mant=1.0+(s>>40)/float(1<<24); e=((s>>20)%17)-8; sign=1.0 if ((s>>10)&1)==0 else -1.0
        out[i]=sign*mant*2.0**e*scale
    return out.astype(np.float32)
def rz(x):
    r=x.astype(np.float32); bad=np.abs(r.astype(np.float64))>np.abs(x)
    r[bad]=np.nextafter(r[bad],np.float32(0)); return r
def split(x):
    m=np.abs(x).max(); e=int(np.floor(np.log2(m))) if m>0 else 0; ex=min(14-e,126)
    y=x.astype(np.float64)*2.0**ex; hi=y.astype(np.float16).astype(np.float64)
    lo=(y-hi).astype(np.float16).astype(np.float64); return hi,lo,ex
def run(m,k,n,sa,sb,seed):
    a=spread(m*k,seed,sa).reshape(m,k); b=spread(k*n,50+seed,sb).reshape(k,n)
    ref=a.astype(np.float64)@b.astype(np.float64)
    acc=np.zeros((m,n),np.float32)
    for l in range(k):  # FMA: one rounding per step
        acc=(acc.astype(np.float64)+np.outer(a[:,l],b[l,:]).astype(np.float64)).astype(np.float32)
    full=acc
    ah,al,ea=split(a); bh,bl,eb=split(b)
    accz=np.zeros((m,n),np.float32); accn=np.zeros((m,n),np.float32)
    for c in range(0,k,16):
        s=slice(c,min(c+16,k))
        t1=al[:,s]@bh[s,:]; t2=ah[:,s]@bl[s,:]; t3=ah[:,s]@bh[s,:]
        accz=rz(accz.astype(np.float64)+t1); accz=rz(accz.astype(np.float64)+t2); accz=rz(accz.astype(np.float64)+t3)
        t=rz(t1); t=rz(t.astype(np.float64)+t2); t=rz(t.astype(np.float64)+t3)
        accn=(accn.astype(np.float64)+t.astype(np.float64)).astype(np.float32)
    unscale=2.0**(-ea-eb)
    def err(x): return np.abs(x.astype(np.float64)*(1 if x is full else unscale)-ref).max()/np.abs(ref).max()
    return err(full), err(accz), err(accn)

# (scale) Per-tensor scales for split operands (one power of two for a whole operand, as
# copies split before their products would need) on a gradient-like operand whose
# rows' magnitudes spread over 2^±S, RN sums per 16-deep step; against an f32 FMA
# loop and f64. Error: largest |x - ref| over the largest |ref|, overall and per
# output row (a row's own scale), the worst row reported.
def run_scale(m,k,n,S):
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

def rounding():
    shapes=[(100,72,132),(40,64,30),(36,200,20),(68,40,92),(52,24,44),(260,136,132),(64,1024,48),(64,2048,48),(256,4096,128)]
    for s,(m,k,n) in enumerate(shapes):
        sa,sb=[(1.0,1.0),(2.0**-30,1.0),(1.0,2.0**20)][s%3]
        f,z,r=run(m,k,n,sa,sb,s)
        print(f"{m}x{k}x{n}: f32 FMA {f:.2e}  split RZ {z:.2e}  split RN {r:.2e}  RZ/FMA {z/f:5.1f}  RN/FMA {r/f:5.1f}")

def scale():
    for S in [0,4,8,12,16,20]:
        (fa,fr),(sa,sr)=run_scale(128,1024,64,S)
        print(f"rows over 2^±{S:2}: overall error f32 FMA {fa:.1e}, split {sa:.1e}; worst row's own error f32 FMA {fr:.1e}, split {sr:.1e}")

if __name__ == "__main__":
    rounding() if sys.argv[1:] != ["scale"] else scale()
