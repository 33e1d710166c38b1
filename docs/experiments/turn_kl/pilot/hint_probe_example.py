import time, torch
from propel.models import load_model
from propel.engines.hf import HFEngine
from propel.engines.engine import Prompt, SamplingSpec
from propel.rollouts.conversation import Conversation
from propel.rollouts.hints import HintSplicer
torch.manual_seed(0)
t0=time.time()
model,tok=load_model("smollm2-135m-instruct")
eng=HFEngine(model,tok)
sys_spl=HintSplicer(tok,"system","Hint: {hint}"); user_spl=HintSplicer(tok,"user","{hint}")
SYSTEM="You are a helpful assistant. Answer in one short line."
def conv(a,b):
    ex=[{"role":"user","content":"What is 2 + 2? End your reply with the tag [blue]."},{"role":"assistant","content":"4 [blue]"}]
    hist=[{"role":"user","content":"What is 3 + 1?"},{"role":"assistant","content":"4"},
          {"role":"user","content":"What is 5 + 2? End your reply with the tag [maple]."},{"role":"assistant","content":"7 [maple]"}]
    q=f"What is {a} + {b}? End your reply with our team's tag."
    msgs=[{"role":"system","content":SYSTEM},*ex,*hist,{"role":"user","content":q}]
    return list(Conversation(tok,msgs,[]).ids), a+b
rows=[]
for a,b in ((6,3),(4,5)):
    ids,ans=conv(a,b)
    rows.append(("none",ans,ids))
    rows.append(("A",ans,sys_spl.splice(ids,"Our team's tag is [cedar]. Example: 4 [cedar]")))
    rows.append(("B",ans,sys_spl.splice(ids,"Reply like this: 4 [cedar]")))
s=SamplingSpec(n=6,temperature=0.7,max_new_tokens=12)
out=eng.generate([Prompt(token_ids=r[2]) for r in rows], s)
print("gen",time.time()-t0,flush=True)
for r,g in zip(rows,out):
    texts=[o.text for o in g]
    print(r[0], r[1], "cedar",sum("[cedar]" in t.lower() for t in texts), "sum", sum(str(r[1]) in t for t in texts), texts, flush=True)
