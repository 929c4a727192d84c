#!/usr/bin/env python3
"""A sequential emulation of the tile algorithm of crates/kiln-cuda/kernels/label.cu,
checked against scipy.ndimage.label: the tiles of label_local (1x1x1024, 1x32x32 or
4x8x32), each row run started at its first element within a warp's 32, the run-overlap
skip (the kernels' `run` 2), label_border's face test (it asserts that every pair the tiles
cut has its element on a face) and the same skip there, then the numbering. Unions run one
at a time here, so this checks the index arithmetic and the skip rule's reasoning, not the
kernels' concurrency (the GPU test `label_gpu` does that).

    python3 scripts/label-tile-emulation.py      (numpy and scipy; a few seconds)
"""
import numpy as np, scipy.ndimage as snd, itertools, sys
def find(P,a):
    while P[a]!=a: a=P[a]
    return a
def union(P,a,b):
    a=find(P,a); b=find(P,b)
    if a<b: P[b]=a
    elif b<a: P[a]=b
def tiles_for(D,H,W):
    if D==1 and H==1: return (1,1,1024)
    if D==1: return (1,32,32)
    return (4,8,32)

def face_planes(x0,y0,z0,td,th,tw,D,H,W):
    """label_border's walk: the planes lx = 0, ly = 0, lz = 0, lx = tw-1, ly = th-1 where
    they can hold a face element, an element on several planes taken on the first; the
    elements that pass the kernel's bounds and face tests, as (lz, ly, lx)."""
    on=[x0>0, y0>0, z0>0, x0+tw<W, y0+th<H and (z0>0 or td>1)]
    ns=[td*th if on[0] else 0, td*tw if on[1] else 0, th*tw if on[2] else 0,
        td*th if on[3] else 0, td*tw if on[4] else 0]
    got=[]
    for e in range(sum(ns)):
        r=e; i=0
        while r>=ns[i]: r-=ns[i]; i+=1
        lx,ly,lz=[(0,r%th,r//th),(r%tw,0,r//tw),(r%tw,r//tw,0),(tw-1,r%th,r//th),(r%tw,th-1,r//tw)][i]
        k=[lx==0,ly==0,lz==0,lx==tw-1,ly==th-1]
        if any(on[j] and k[j] for j in range(i)): continue  # on an earlier plane
        x,y,z=x0+lx,y0+ly,z0+lz
        if x>=W or y>=H or z>=D: continue
        face=(lx==0 and x>0) or (ly==0 and y>0) or (lz==0 and z>0) or (lx==tw-1 and x+1<W and (y>0 or z>0)) or (ly==th-1 and y+1<H and z>0)
        if face: got.append((lz,ly,lx))
    return got

def label(mask, struct):
    m = mask.reshape((1,)*(3-mask.ndim)+mask.shape)
    D,H,W = m.shape
    st = struct.reshape((1,)*(3-struct.ndim)+struct.shape)
    c = np.array(st.shape)//2
    offs=[tuple(int(v) for v in (np.array(i)-c)) for i in zip(*np.nonzero(st))]
    offs=[o for o in offs if o<(0,0,0) and all(abs(v)<=1 for v in o)]
    td,th,tw = tiles_for(D,H,W)
    flat = m.ravel(); n=flat.size
    L = np.full(n,-2,dtype=np.int64)
    tx=-(-W//tw); ty=-(-H//th); tz=-(-D//td)
    for b in range(tx*ty*tz):
        x0=(b%tx)*tw; y0=((b//tx)%ty)*th; z0=(b//(tx*ty))*td
        tsz=td*th*tw; s=[-1]*tsz
        run = (0,0,-1) in offs
        on=[False]*tsz
        for e in range(tsz):
            lx=e%tw; ly=(e//tw)%th; lz=e//(tw*th); x,y,z=x0+lx,y0+ly,z0+lz
            if x<W and y<H and z<D and flat[(z*H+y)*W+x]: on[e]=True; s[e]=e
        if run:
            for e in range(tsz):
                if on[e]:
                    lane=e%32; st=lane
                    while st>0 and on[e-lane+st-1]: st-=1
                    s[e]=e-lane+st
        for e in range(tsz):
            if s[e]<0: continue
            lx=e%tw; ly=(e//tw)%th; lz=e//(tw*th)
            for dz,dy,dx in offs:
                if run and e%32 and (dz,dy,dx)==(0,0,-1): continue
                nz,ny,nx=lz+dz,ly+dy,lx+dx
                if not(0<=nz<td and 0<=ny<th and 0<=nx<tw): continue
                q=(nz*th+ny)*tw+nx
                if s[q]<0: continue
                if run and (dz,dy,dx)!=(0,0,-1) and lx>0 and nx>0 and s[e-1]>=0 and s[q-1]>=0: continue
                union(s,e,q)
        for e in range(tsz):
            lx=e%tw; ly=(e//tw)%th; lz=e//(tw*th); x,y,z=x0+lx,y0+ly,z0+lz
            if x>=W or y>=H or z>=D: continue
            v=-1
            if s[e]>=0:
                r=find(s,e); rx=r%tw; ry=(r//tw)%th; rz=r//(tw*th)
                v=((z0+rz)*H+y0+ry)*W+x0+rx
            L[(z*H+y)*W+x]=v
    assert (L>=-1).all()
    for b in range(tx*ty*tz):
        x0=(b%tx)*tw; y0=((b//tx)%ty)*th; z0=(b//(tx*ty))*td
        walked=[]
        for e in range(td*th*tw):
            lx=e%tw; ly=(e//tw)%th; lz=e//(tw*th); x,y,z=x0+lx,y0+ly,z0+lz
            if x>=W or y>=H or z>=D: continue
            face=(lx==0 and x>0) or (ly==0 and y>0) or (lz==0 and z>0) or (lx==tw-1 and x+1<W and (y>0 or z>0)) or (ly==th-1 and y+1<H and z>0)
            if face: walked.append((lz,ly,lx))
            p=(z*H+y)*W+x
            crosses=False
            for dz,dy,dx in offs:
                nz,ny,nx=lz+dz,ly+dy,lx+dx
                if 0<=nz<td and 0<=ny<th and 0<=nx<tw: continue
                zz,yy,xx=z0+nz,y0+ny,x0+nx
                if not(0<=zz<D and 0<=yy<H and 0<=xx<W): continue
                crosses=True
                q=(zz*H+yy)*W+xx
                if L[p]<0 or L[q]<0: continue
                if (0,0,-1) in offs and (dz,dy,dx)!=(0,0,-1) and x>0 and xx>0 and L[p-1]>=0 and L[q-1]>=0: continue
                if face: union(L,p,q)
            assert face or not crosses, (x,y,z)
        # label_border walks only the tile's face planes: the same face elements, each once
        planes=face_planes(x0,y0,z0,td,th,tw,D,H,W)
        assert sorted(planes)==sorted(walked) and len(set(planes))==len(planes),(b,td,th,tw)
    roots=[p for p in range(n) if L[p]==p]
    for r,p in enumerate(roots): L[p]=-(r+1)-1
    out=np.zeros(n,dtype=np.int64)
    for p in range(n):
        v=L[p]
        if v==-1: continue
        while v>=0: v=L[v]
        out[p]=-v-1
    return out.reshape(mask.shape), len(roots)
rng=np.random.default_rng(1)
cases=[(70,),(2500,),(50,70),(33,65),(64,64),(70,100),(9,13,40),(5,17,70),(9,20,64)]
for shape in cases:
    for conn in range(1,len(shape)+1):
        for dens in (0.3,0.6):
            m=rng.random(shape)<dens
            s=snd.generate_binary_structure(len(shape),conn)
            want,wn=snd.label(m,s)
            got,gn=label(m,s)
            assert gn==wn and np.array_equal(got,want),(shape,conn,dens)
print("ok")
