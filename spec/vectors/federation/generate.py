"""Writes messages.json beside this script from spec/federation.md's layouts,
independently of the hub's encoder (crates/fieldhub-hub/src/federation/event.rs),
which is tested against the file. Run it after changing the spec's layouts."""
import json, os, struct
KIND={'can':0,'canfd':1,'error':2,'canxl':4,'raw':5}
FLAG={'extended':1,'remote':2,'brs':4,'esi':8,'echo':0x10,'sec':1,'rrs':2}
REASON={'bus_off':1,'fault_rule':2,'owner_lost':3,'unplugged':4,'queue_full':5}
def frame(f):
    flags=sum(FLAG[x] for x in f['flags'])
    data=bytes.fromhex(f['data'])
    af=struct.pack('<I',f['af']) if f['kind']=='canxl' else b''
    return bytes([KIND[f['kind']],flags])+struct.pack('<IHB',f['id'],f['len'],f['len8_dlc'])+af+struct.pack('<H',len(data))+data
def origin(o):
    r=o['relay'].encode()
    return bytes([len(r)])+r+struct.pack('<IQ',o['port_id'],o['arrival'])
def request(v): return origin(v['origin'])+frame(v['frame'])
def event(v):
    b=struct.pack('<QQQQQ',v['term']['epoch'],v['term']['incarnation'],v['seq'],v['start_ns'],v['end_ns'])
    b+=bytes([0]) if v['origin'] is None else bytes([1])+origin(v['origin'])
    if 'frame' in v['body']: b+=bytes([0])+frame(v['body']['frame'])
    else: b+=bytes([1])+struct.pack('<H',REASON[v['body']['dropped']])
    return b
def batch(items): return b''.join(struct.pack('<H',len(i))+i for i in items)
def reply(v): return struct.pack('<QB',v['last'],1 if v['done'] else 0)+b''.join(struct.pack('<I',len(e))+e for e in v['events_bytes'])

f_can={'kind':'can','flags':[],'id':0x123,'len':3,'len8_dlc':0,'data':'010203'}
f_ext_rtr={'kind':'can','flags':['extended','remote'],'id':0x1ABCDEF,'len':4,'len8_dlc':0,'data':''}
f_fd={'kind':'canfd','flags':['brs'],'id':0x7FF,'len':64,'len8_dlc':0,'data':'09'*64}
f_dlc={'kind':'can','flags':[],'id':0x10,'len':8,'len8_dlc':15,'data':'0001020304050607'}
f_err={'kind':'error','flags':[],'id':0x4,'len':8,'len8_dlc':0,'data':'0001020304050607'}
f_xl={'kind':'canxl','flags':['sec'],'id':0x420123,'len':2048,'len8_dlc':3,'af':0x12345678,'data':'a5'*2048}
f_raw={'kind':'raw','flags':[],'id':0xDEADBEEF,'len':300,'len8_dlc':0,'data':'5a'*300}
o1={'relay':'a1b2c3d4e5f60718293a4b5c6d7e8f90','port_id':7,'arrival':42}
vec=[]
def add(name,kind,body,hexb,note=None):
    v={'name':name,'kind':kind,'valid':True}; v.update(body); v['hex']=hexb.hex()
    if note: v['note']=note
    vec.append(v)
for n,f in [('request_classic',f_can),('request_extended_remote',f_ext_rtr),('request_fd_64_brs',f_fd),('request_classic_raw_dlc_15',f_dlc),('request_can_xl_2048',f_xl),('request_raw_300',f_raw)]:
    v={'origin':o1,'frame':f}; add(n,'request',v,request(v))
e_own={'term':{'epoch':1,'incarnation':1700000000123456789},'seq':1,'start_ns':1000000,'end_ns':1230000,'origin':None,'body':{'frame':f_can}}
e_rel={'term':{'epoch':2,'incarnation':5},'seq':18446744073709551615,'start_ns':5,'end_ns':77,'origin':{'relay':'r','port_id':4294967295,'arrival':18446744073709551615},'body':{'frame':f_fd}}
e_drop={'term':{'epoch':3,'incarnation':9},'seq':12,'start_ns':0,'end_ns':0,'origin':o1,'body':{'dropped':'fault_rule'}}
e_err={'term':{'epoch':1,'incarnation':1},'seq':2,'start_ns':10,'end_ns':20,'origin':None,'body':{'frame':f_err}}
add('event_owner_port_frame','event',e_own,event(e_own),'a frame of one of the owner\'s own ports: no origin')
add('event_relay_port_frame_limits','event',e_rel,event(e_rel))
add('event_dropped_fault_rule','event',e_drop,event(e_drop),'start_ns and end_ns are 0 for a drop')
add('event_error_frame','event',e_err,event(e_err))
e_xl={'term':{'epoch':1,'incarnation':1},'seq':3,'start_ns':20,'end_ns':1882820,'origin':o1,'body':{'frame':f_xl}}
add('event_can_xl_2048','event',e_xl,event(e_xl),'a 2048-byte CAN XL frame: u16 len, the acceptance field after len8_dlc (the SDT)')
items=[event(e_own),event(e_err)]
vec.append({'name':'batch_of_two_events','kind':'batch','valid':True,'items':[i.hex() for i in items],'hex':batch(items).hex()})
ritems=[request({'origin':o1,'frame':f_can})]
vec.append({'name':'batch_of_one_request','kind':'batch','valid':True,'items':[i.hex() for i in ritems],'hex':batch(ritems).hex(),'note':'a lone frame goes at once, as a batch of one'})
r={'last':2,'done':False,'events_bytes':items}
vec.append({'name':'history_reply_two_events','kind':'history_reply','valid':True,'last':2,'done':False,'events':[i.hex() for i in items],'hex':reply(r).hex()})
r0={'last':0,'done':True,'events_bytes':[]}
vec.append({'name':'history_reply_empty_done','kind':'history_reply','valid':True,'last':0,'done':True,'events':[],'hex':reply(r0).hex()})
def bad(name,kind,b,err,note=None):
    v={'name':name,'kind':kind,'valid':False,'hex':b.hex(),'error':err}
    if note: v['note']=note
    vec.append(v)
rq=request({'origin':o1,'frame':f_can})
bad('request_truncated','request',rq[:-1],'truncated')
bad('request_trailing_byte','request',rq+b'\0','trailing_bytes')
bad('request_origin_not_utf8','request',bytes([2,0xff,0xfe])+rq[1+32:],'origin')
bad('request_unknown_kind','request',origin(o1)+bytes([6])+frame(f_can)[1:],'kind','kinds 6..255 are reserved (spec/protocol.md 4.1)')
bad('request_reserved_flag','request',origin(o1)+bytes([0,0x40])+frame(f_can)[2:],'flags','0x20 is LIN_STANDING, refused on a CAN frame as frame; 0x40 is reserved (spec/protocol.md 4.2)')
bad('request_classic_id_too_big','request',origin(o1)+frame(dict(f_can,id=0x800)),'frame','an 11-bit id above 0x7FF (spec/protocol.md 4.3)')
bad('request_fd_length_13','request',origin(o1)+frame(dict(f_fd,len=13,data='00'*13)),'frame')
bad('request_can_xl_2049','request',origin(o1)+frame(dict(f_xl,len=2049,data='00'*2049)),'frame','CAN XL carries 1..=2048 bytes (spec/protocol.md 4.3)')
bad('request_can_xl_af_cut_short','request',origin(o1)+frame(f_xl)[:9],'truncated','the acceptance field of a canxl frame cut short')
ev=event(e_drop)
bad('event_unknown_body','event',ev[:-3]+bytes([2]),'body')
bad('event_unknown_reason','event',ev[:-2]+struct.pack('<H',99),'reason','a receiver of this revision knows reasons 1..5')
bad('event_truncated','event',event(e_own)[:40],'truncated')
bad('batch_empty','batch',b'','empty_batch')
bad('batch_item_cut_short','batch',struct.pack('<H',10)+b'\0'*4,'truncated')
bad('history_reply_truncated_event','history_reply',struct.pack('<QB',1,0)+struct.pack('<I',100)+b'\0',"truncated")
doc={'description':'What federated hubs send each other over Zenoh (spec/federation.md): relays\' transmit requests, owners\' committed events, batches of either, history replies.','vectors':vec}
open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'messages.json'), 'w').write(json.dumps(doc,indent=2)+'\n')
print(len(vec), 'vectors')
