#!/usr/bin/env python3
"""Print docs/zmem.1's COMMAND OPTIONS section afresh from the zmem
command's own help: each command's options (zmem CMD --help) and ctl's
verbs.  tests/cli/test_manpage.sh checks the page against the help; when
an option changes, replace the section with this output:

    scripts/manopts.py build/zmem
"""
import re, subprocess, sys
Z=sys.argv[1] if len(sys.argv) > 1 else 'zmem'
def run(*a): return subprocess.run([Z,*a],capture_output=True,text=True).stdout
def esc(t):
    t=t.replace('\\','\\e').replace('-','\\-')
    return t
def line(t):
    t=esc(t)
    if t.startswith('.') or t.startswith("'"): t='\\&'+t
    return t
cmds=re.findall(r'^  ([a-z][a-z0-9-]*)  ', run('help'), re.M)
out=['.SH COMMAND OPTIONS',
'Each command\'s options as its',
'.B \\-\\-help',
'gives them, with their defaults and limits; every command also takes',
'.BR \\-h ", " \\-\\-help " and " \\-q ", " \\-\\-quiet .']
def opts(text, title):
    o=[]
    sec=text.split('\nOptions:\n',1)[1]
    sec=sec.split('\n\n',1)[0]
    cur=None
    for l in sec.split('\n'):
        m1=re.match(r'^  (?:-(.), |    )--([a-z0-9-]+)(?: (\S+))?(?: {2,}(.*))?$', l)
        if m1:
            s,n,a,h=m1.groups()
            if n in ('help','quiet'): cur=None; continue
            cur=[s,n,a,[h] if h else []]; o.append(cur)
        elif cur is not None and l.startswith(' '*24):
            cur[3].append(l.strip())
    out.append('.SS '+title)
    for s,n,a,h in o:
        head=('\\-%s, '%s if s else '')+'\\-\\-'+esc(n)
        out.append('.TP')
        if a: out.append('.BI "%s " %s' % (head, esc(a)))
        else: out.append('.B "%s"' % head)
        out.append(line(' '.join(h)))
for c in cmds:
    opts(run(c,'--help'),'zmem '+c)
    if c=='allocbench':
        opts(run(c,'--latency','--help'),'zmem allocbench \\-\\-latency')
# ctl verbs
t=run('ctl','--help')
out.append('.SS zmem ctl verbs')
out.append('A server\'s (SOCKET, HOST:PORT or none):')
for part,title in ((t.split('\nVerbs:\n',1)[1].split('\n\n',1)[0],None),(t.split('(run:PID):\n',1)[1].split('\n\n',1)[0],'A zmem run\'s (run:PID):')):
    if title:
        out.append('.PP'); out.append(title)
    cur=None
    for l in part.split('\n'):
        if l.startswith(' '*19) and cur is not None:
            cur[1].append(l.strip()); continue
        if l.startswith('  ') and l[2] != ' ':
            if len(l) > 19 and l[18] == ' ':
                cur=[l[2:18].strip(),[l[19:].strip()]]
            else:
                cur=[l[2:].strip(),[]]
            out.append(cur)
    # flatten
    for i,x in enumerate(out):
        if isinstance(x,list):
            v=x[0].split(' ',1)
            out[i]='.TP\n'+('.BI "%s " "%s"' % (esc(v[0]), esc(v[1])) if len(v)>1 else '.B %s' % esc(v[0]))+'\n'+line(' '.join(x[1]))
print('\n'.join(out))
