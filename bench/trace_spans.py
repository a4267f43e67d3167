import json,sys,statistics,collections
t=json.load(open(sys.argv[1]))
ev=t["traceEvents"] if isinstance(t,dict) else t
names={}
for e in ev:
    if e.get("ph")=="M" and e.get("name")=="thread_name": names[(e["pid"],e["tid"])]=e["args"]["name"]
by=collections.defaultdict(list)
for e in ev:
    if e.get("ph")=="X":
        th=names.get((e["pid"],e["tid"]),str(e["tid"]))
        by[(th.split(" ")[0]+" "+th.split(" ")[1] if " " in th else th, e["name"])].append((e["ts"],e["dur"]))
for k,v in sorted(by.items()):
    v.sort(); d=[x[1] for x in v]
    print(k, "n=%d sum=%.1fms med=%.3fms max=%.1fms first=%s"%(len(d),sum(d)/1e3,statistics.median(d)/1e3,max(d)/1e3,[round(x/1e3,1) for x in d[:3]]))
