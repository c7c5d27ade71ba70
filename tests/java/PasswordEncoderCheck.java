// Cross-check of broker/password_encoder.py against Java's JCE, the way Kafka's
// EncryptingPasswordEncoder uses it (PBKDF2 key, AES cipher, parameters stored beside the value).
// Ours, written for tests/integration/test_java_password_encoder.py.
//   java PasswordEncoderCheck decode <secret> <encoded>     -> prints the password
//   java PasswordEncoderCheck encode <secret> <cipher> <password> -> prints Kafka's stored form
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.util.*;
import javax.crypto.Cipher;
import javax.crypto.SecretKeyFactory;
import javax.crypto.spec.*;

public class PasswordEncoderCheck {
    static Map<String, String> fields(String s) {
        Map<String, String> m = new HashMap<>();
        for (String kv : s.split(",")) {
            int i = kv.indexOf(':');
            m.put(kv.substring(0, i), kv.substring(i + 1));
        }
        return m;
    }

    static SecretKeySpec key(String secret, String kdf, byte[] salt, int iterations, int bits, String cipher) throws Exception {
        PBEKeySpec spec = new PBEKeySpec(secret.toCharArray(), salt, iterations, bits);
        byte[] raw = SecretKeyFactory.getInstance(kdf).generateSecret(spec).getEncoded();
        return new SecretKeySpec(raw, cipher.substring(0, cipher.indexOf('/')));
    }

    public static void main(String[] a) throws Exception {
        Base64.Decoder d = Base64.getDecoder();
        Base64.Encoder e = Base64.getEncoder();
        if (a[0].equals("decode")) {
            Map<String, String> p = fields(a[2]);
            String alg = p.get("cipherAlgorithm");
            SecretKeySpec k = key(a[1], p.get("keyFactoryAlgorithm"), d.decode(p.get("salt")),
                                  Integer.parseInt(p.get("iterations")), Integer.parseInt(p.get("keyLength")), alg);
            Cipher c = Cipher.getInstance(alg);
            byte[] iv = d.decode(p.get("initializationVector"));
            if (alg.startsWith("AES/GCM/"))
                c.init(Cipher.DECRYPT_MODE, k, new GCMParameterSpec(Integer.parseInt(p.get("authenticationTagLength")), iv));
            else
                c.init(Cipher.DECRYPT_MODE, k, new IvParameterSpec(iv));
            String out = new String(c.doFinal(d.decode(p.get("encryptedPassword"))), StandardCharsets.UTF_8);
            if (out.length() != Integer.parseInt(p.get("passwordLength")))
                throw new IllegalStateException("length check failed");
            System.out.println(out);
        } else {
            String alg = a[2];
            byte[] salt = new byte[256];
            new SecureRandom().nextBytes(salt);
            SecretKeySpec k = key(a[1], "PBKDF2WithHmacSHA512", salt, 4096, 128, alg);
            Cipher c = Cipher.getInstance(alg);
            c.init(Cipher.ENCRYPT_MODE, k);
            byte[] enc = c.doFinal(a[3].getBytes(StandardCharsets.UTF_8));
            StringBuilder sb = new StringBuilder("keyFactoryAlgorithm:PBKDF2WithHmacSHA512,cipherAlgorithm:" + alg
                + ",keyLength:128,salt:" + e.encodeToString(salt) + ",iterations:4096,encryptedPassword:"
                + e.encodeToString(enc) + ",passwordLength:" + a[3].length());
            if (alg.startsWith("AES/GCM/")) {
                GCMParameterSpec g = c.getParameters().getParameterSpec(GCMParameterSpec.class);
                sb.append(",initializationVector:").append(e.encodeToString(g.getIV()))
                  .append(",authenticationTagLength:").append(g.getTLen());
            } else {
                IvParameterSpec iv = c.getParameters().getParameterSpec(IvParameterSpec.class);
                sb.append(",initializationVector:").append(e.encodeToString(iv.getIV()));
            }
            System.out.println(sb);
        }
    }
}
