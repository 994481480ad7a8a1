import { createSocket, type Socket } from 'node:dgram';
import { once } from 'node:events';

/**
 * A DNS server on a UDP port of `host` (loopback unless told) standing in for the outside's DNS: it answers A queries for
 * the names in `records` with their address, with no answer (NOERROR) for other types of those
 * names, and NXDOMAIN for any other name.
 */
export async function startDnsServer(records: Record<string, string>, host = '127.0.0.1'): Promise<{ address: string; close(): void }> {
  const socket: Socket = createSocket('udp4');
  socket.on('message', (query, peer) => socket.send(answer(query, records), peer.port, peer.address));
  socket.bind(0, host);
  await once(socket, 'listening');
  return { address: `${host}:${socket.address().port}`, close: () => socket.close() };
}

function answer(query: Buffer, records: Record<string, string>): Buffer {
  const labels: string[] = [];
  let at = 12;
  while (query[at]! > 0) {
    labels.push(query.subarray(at + 1, at + 1 + query[at]!).toString('ascii'));
    at += query[at]! + 1;
  }
  const questionEnd = at + 5; // the terminating zero, QTYPE, QCLASS
  const type = query.readUInt16BE(at + 1);
  const address = records[labels.join('.').toLowerCase()];
  const header = Buffer.alloc(12);
  query.copy(header, 0, 0, 2); // id
  const found = address !== undefined;
  const answers = found && type === 1 ? 1 : 0;
  header.writeUInt16BE(0x8180 | (found ? 0 : 3), 2); // response, recursion desired and available; NXDOMAIN when unknown
  header.writeUInt16BE(1, 4);
  header.writeUInt16BE(answers, 6);
  const question = query.subarray(12, questionEnd);
  if (answers === 0) return Buffer.concat([header, question]);
  const record = Buffer.alloc(16);
  record.writeUInt16BE(0xc00c, 0); // the name, as in the question
  record.writeUInt16BE(1, 2); // A
  record.writeUInt16BE(1, 4); // IN
  record.writeUInt32BE(60, 6); // TTL
  record.writeUInt16BE(4, 10);
  Buffer.from(address!.split('.').map(Number)).copy(record, 12);
  return Buffer.concat([header, question, record]);
}
