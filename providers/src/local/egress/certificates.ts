import { X509Certificate, createHash, createPrivateKey, createPublicKey, generateKeyPairSync, randomBytes, sign, type KeyObject } from 'node:crypto';
import { isIP } from 'node:net';

/**
 * X.509 certificates for the egress proxy (ADR 46): a certificate authority per sandbox, and a
 * server certificate per host the proxy terminates TLS for, signed by it. ECDSA P-256 keys made
 * with node:crypto, and the certificates written in DER by hand (node:crypto reads certificates
 * but does not make them): a key takes a fraction of a millisecond, a certificate less.
 */

export interface CertificateAuthority {
  /** The CA's certificate, PEM: what the sandbox trusts. */
  certificatePem: string;
  /** Its private key, PEM (PKCS#8): stays on the host. */
  keyPem: string;
}

export interface IssuedCertificate {
  certificatePem: string;
  keyPem: string;
}

const OID = {
  commonName: '2.5.4.3',
  organization: '2.5.4.10',
  ecdsaWithSha256: '1.2.840.10045.4.3.2',
  subjectKeyIdentifier: '2.5.29.14',
  keyUsage: '2.5.29.15',
  subjectAltName: '2.5.29.17',
  basicConstraints: '2.5.29.19',
  authorityKeyIdentifier: '2.5.29.35',
  extendedKeyUsage: '2.5.29.37',
  serverAuth: '1.3.6.1.5.5.7.3.1',
};

/** How long a certificate is valid: a sandbox runs at most a day between restores, which make a new CA. */
const VALIDITY_MS = 90 * 24 * 3600 * 1000;
/** Valid from a little before now, for clocks that differ. */
const BACKDATE_MS = 3600 * 1000;

/** A new certificate authority named `name` (its common name). */
export function createCertificateAuthority(name: string, now = new Date()): CertificateAuthority {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const spki = publicKey.export({ type: 'spki', format: 'der' });
  const keyId = keyIdentifier(spki);
  const subject = distinguishedName(name);
  const certificate = signCertificate({
    issuer: subject,
    subject,
    spki,
    now,
    signer: privateKey,
    extensions: [
      extension(OID.basicConstraints, true, sequence(boolean(true), integer(Buffer.from([0])))),
      // keyCertSign and cRLSign (bits 5 and 6), and digitalSignature (bit 0).
      extension(OID.keyUsage, true, bitString(Buffer.from([0x86]), 1)),
      extension(OID.subjectKeyIdentifier, false, octetString(keyId)),
    ],
  });
  return { certificatePem: pem('CERTIFICATE', certificate), keyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString() };
}

/**
 * A server certificate for `host` (a DNS name or an IP address), signed by `ca`. `key` is the
 * server's private key: one per sandbox serves all its hosts.
 */
export function issueServerCertificate(ca: CertificateAuthority, host: string, key: KeyObject, now = new Date()): IssuedCertificate {
  const caKey = createPrivateKey(ca.keyPem);
  const caSpki = createPublicKey(caKey).export({ type: 'spki', format: 'der' });
  const spki = createPublicKey(key).export({ type: 'spki', format: 'der' });
  const family = isIP(host);
  const altName = family === 0 ? tlv(0x82, Buffer.from(host, 'ascii')) : tlv(0x87, ipBytes(host, family));
  const certificate = signCertificate({
    issuer: issuerOf(ca.certificatePem),
    subject: distinguishedName(host),
    spki,
    now,
    signer: caKey,
    extensions: [
      extension(OID.basicConstraints, true, sequence()),
      // digitalSignature (bit 0).
      extension(OID.keyUsage, true, bitString(Buffer.from([0x80]), 7)),
      extension(OID.extendedKeyUsage, false, sequence(oid(OID.serverAuth))),
      extension(OID.subjectAltName, false, sequence(altName)),
      extension(OID.subjectKeyIdentifier, false, octetString(keyIdentifier(spki))),
      extension(OID.authorityKeyIdentifier, false, sequence(tlv(0x80, keyIdentifier(caSpki)))),
    ],
  });
  return { certificatePem: pem('CERTIFICATE', certificate), keyPem: key.export({ type: 'pkcs8', format: 'pem' }).toString() };
}

/** A new ECDSA P-256 private key. */
export function newServerKey(): KeyObject {
  return generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
}

/** The subject of a PEM certificate, as the DER `Name` an issued certificate's issuer must equal. */
function issuerOf(certificatePem: string): Buffer {
  const der = new X509Certificate(certificatePem).raw;
  // Certificate → tbsCertificate → [version, serial, signature, issuer, validity, subject, ...]
  const tbs = children(children(der)[0]!);
  return tbs[5]!;
}

interface CertificateFields {
  issuer: Buffer;
  subject: Buffer;
  spki: Buffer;
  now: Date;
  signer: KeyObject;
  extensions: Buffer[];
}

function signCertificate(fields: CertificateFields): Buffer {
  const serial = randomBytes(16);
  serial[0] = (serial[0]! & 0x7f) | 0x40; // positive, and minimal (DER forbids a leading zero byte)
  const algorithm = sequence(oid(OID.ecdsaWithSha256));
  const tbs = sequence(
    tlv(0xa0, integer(Buffer.from([2]))), // v3
    integer(serial),
    algorithm,
    fields.issuer,
    sequence(time(new Date(fields.now.getTime() - BACKDATE_MS)), time(new Date(fields.now.getTime() + VALIDITY_MS))),
    fields.subject,
    fields.spki,
    tlv(0xa3, sequence(...fields.extensions)),
  );
  const signature = sign('sha256', tbs, fields.signer);
  return sequence(tbs, algorithm, bitString(signature, 0));
}

function distinguishedName(commonName: string): Buffer {
  return sequence(
    tlv(0x31, sequence(oid(OID.organization), tlv(0x0c, Buffer.from('Berth egress proxy', 'utf8')))),
    tlv(0x31, sequence(oid(OID.commonName), tlv(0x0c, Buffer.from(commonName.slice(0, 64), 'utf8')))),
  );
}

function extension(id: string, critical: boolean, value: Buffer): Buffer {
  return sequence(oid(id), ...(critical ? [boolean(true)] : []), octetString(value));
}

/** The key identifier of RFC 5280 4.2.1.2 (1): SHA-1 of the public key's bits. */
function keyIdentifier(spki: Buffer): Buffer {
  const publicKeyBits = children(spki)[1]!;
  return createHash('sha1').update(contentOf(publicKeyBits).subarray(1)).digest();
}

function ipBytes(address: string, family: number): Buffer {
  if (family === 4) return Buffer.from(address.split('.').map(Number));
  const [head = '', tail = ''] = address.split('::');
  const groups = (text: string) => (text ? text.split(':') : []);
  const front = groups(head);
  const back = address.includes('::') ? groups(tail) : [];
  const all = [...front, ...Array<string>(8 - front.length - back.length).fill('0'), ...back];
  return Buffer.concat(all.map((group) => Buffer.from([parseInt(group, 16) >> 8, parseInt(group, 16) & 0xff])));
}

function time(date: Date): Buffer {
  const iso = date.toISOString().replace(/[-:T]/g, '').slice(0, 14) + 'Z'; // YYYYMMDDHHMMSSZ
  // UTCTime until 2049, GeneralizedTime after (RFC 5280 4.1.2.5).
  return date.getUTCFullYear() < 2050 ? tlv(0x17, Buffer.from(iso.slice(2), 'ascii')) : tlv(0x18, Buffer.from(iso, 'ascii'));
}

function pem(label: string, der: Buffer): string {
  const lines = der.toString('base64').match(/.{1,64}/g) ?? [];
  return `-----BEGIN ${label}-----\n${lines.join('\n')}\n-----END ${label}-----\n`;
}

// DER, as far as certificates need it.

function tlv(tag: number, content: Buffer): Buffer {
  const length = content.length;
  let header: Buffer;
  if (length < 0x80) header = Buffer.from([tag, length]);
  else {
    const bytes: number[] = [];
    for (let rest = length; rest > 0; rest >>= 8) bytes.unshift(rest & 0xff);
    header = Buffer.from([tag, 0x80 | bytes.length, ...bytes]);
  }
  return Buffer.concat([header, content]);
}

function sequence(...items: Buffer[]): Buffer {
  return tlv(0x30, Buffer.concat(items));
}

function integer(bytes: Buffer): Buffer {
  return tlv(0x02, bytes[0]! & 0x80 ? Buffer.concat([Buffer.from([0]), bytes]) : bytes);
}

function boolean(value: boolean): Buffer {
  return tlv(0x01, Buffer.from([value ? 0xff : 0]));
}

function octetString(bytes: Buffer): Buffer {
  return tlv(0x04, bytes);
}

function bitString(bytes: Buffer, unusedBits: number): Buffer {
  return tlv(0x03, Buffer.concat([Buffer.from([unusedBits]), bytes]));
}

function oid(dotted: string): Buffer {
  const [first = 0, second = 0, ...rest] = dotted.split('.').map(Number);
  const bytes = [40 * first + second];
  for (const arc of rest) {
    const groups: number[] = [];
    for (let value = arc; ; value = Math.floor(value / 128)) {
      groups.unshift(value % 128);
      if (value < 128) break;
    }
    bytes.push(...groups.map((group, index) => (index < groups.length - 1 ? group | 0x80 : group)));
  }
  return tlv(0x06, Buffer.from(bytes));
}

/** The elements of a DER constructed value (a SEQUENCE), each with its tag and length. */
function children(der: Buffer): Buffer[] {
  const content = contentOf(der);
  const items: Buffer[] = [];
  for (let at = 0; at < content.length; ) {
    const { headerLength, length } = header(content, at);
    items.push(content.subarray(at, at + headerLength + length));
    at += headerLength + length;
  }
  return items;
}

function contentOf(der: Buffer): Buffer {
  const { headerLength, length } = header(der, 0);
  return der.subarray(headerLength, headerLength + length);
}

function header(der: Buffer, at: number): { headerLength: number; length: number } {
  const first = der[at + 1]!;
  if (first < 0x80) return { headerLength: 2, length: first };
  const count = first & 0x7f;
  let length = 0;
  for (let index = 0; index < count; index++) length = length * 256 + der[at + 2 + index]!;
  return { headerLength: 2 + count, length };
}
