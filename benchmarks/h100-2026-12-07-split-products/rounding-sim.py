# Simulates the split product's rounding: f16 halves, products exact, f32 sums
# rounded toward zero per 16-deep MMA (RZ, as Ootomo & Yokota measured on NVIDIA
# tensor cores) or per MMA chain then added round-to-nearest (RN), against an f32
# FMA loop and an f64 reference. Operands as in split_precision_products_keep_f32_accuracy.
import numpy as np
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
shapes=[(100,72,132),(40,64,30),(36,200,20),(68,40,92),(52,24,44),(260,136,132),(64,1024,48),(64,2048,48),(256,4096,128)]
for s,(m,k,n) in enumerate(shapes):
    sa,sb=[(1.0,1.0),(2.0**-30,1.0),(1.0,2.0**20)][s%3]
    f,z,r=run(m,k,n,sa,sb,s)
    print(f"{m}x{k}x{n}: f32 FMA {f:.2e}  split RZ {z:.2e}  split RN {r:.2e}  RZ/FMA {z/f:5.1f}  RN/FMA {r/f:5.1f}")
