"""The gate of each scrub rule (policy/scrub_gate.py), written by
`python -m dsh_recall.policy.scrub`; do not edit by hand."""

from .scrub_gate import Gate

GATES: dict[tuple[str, int], Gate] = {
    ('(?:A3T[A-Z0-9]|ABIA|ACCA|AKIA|ASIA)[0-9A-Z]{16}', 32):
        Gate(literals=('A3T', 'ABIA', 'ACCA', 'AKIA', 'ASIA'), folded=False, one_line=True, superset=''),
    ('aws.{0,20}?(?:key|pwd|pw|password|pass|token).{0,20}?[\\\'\\"]([0-9a-zA-Z/+]{40})[\\\'\\"]', 34):
        Gate(literals=('aws',), folded=True, one_line=True, superset=''),
    ('AccountKey=[a-zA-Z0-9+\\/=]{88}', 32):
        Gate(literals=('AccountKey=',), folded=False, one_line=True, superset=''),
    ("://[^:/\\?\\#\\[\\]@!\\$\\&'\\(\\)\\*\\+,;=\\s]+:([^:/\\?\\#\\[\\]@!\\$\\&'\\(\\)\\*\\+,;=\\s]+)@", 32):
        Gate(literals=('://',), folded=False, one_line=True, superset=''),
    ('[MNO][a-zA-Z\\d_-]{23,25}\\.[a-zA-Z\\d_-]{6}\\.[a-zA-Z\\d_-]{27}', 32):
        Gate(literals=('.',), folded=False, one_line=True, superset='[MNO](?:[a-zA-Z0-9_-]|[^\\x00-\\x7f]){23,25}\\.(?:[a-zA-Z0-9_-]|[^\\x00-\\x7f]){6}\\.(?:[a-zA-Z0-9_-]|[^\\x00-\\x7f]){27}'),
    ('(ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9_]{36}', 32):
        Gate(literals=('gho_', 'ghp_', 'ghr_', 'ghs_', 'ghu_'), folded=False, one_line=True, superset=''),
    ('(glpat|gldt|glft|glsoat|glrt)-[A-Za-z0-9_\\-]{20,50}(?!\\w)', 32):
        Gate(literals=('gldt-', 'glft-', 'glpat-', 'glrt-', 'glsoat-'), folded=False, one_line=True, superset=''),
    ('GR1348941[A-Za-z0-9_\\-]{20,50}(?!\\w)', 32):
        Gate(literals=('GR1348941',), folded=False, one_line=True, superset=''),
    ('glcbt-([0-9a-fA-F]{2}_)?[A-Za-z0-9_\\-]{20,50}(?!\\w)', 32):
        Gate(literals=('glcbt-',), folded=False, one_line=True, superset=''),
    ('glimt-[A-Za-z0-9_\\-]{25}(?!\\w)', 32):
        Gate(literals=('glimt-',), folded=False, one_line=True, superset=''),
    ('glptt-[A-Za-z0-9_\\-]{40}(?!\\w)', 32):
        Gate(literals=('glptt-',), folded=False, one_line=True, superset=''),
    ('glagent-[A-Za-z0-9_\\-]{50,1024}(?!\\w)', 32):
        Gate(literals=('glagent-',), folded=False, one_line=True, superset=''),
    ('gloas-[A-Za-z0-9_\\-]{64}(?!\\w)', 32):
        Gate(literals=('gloas-',), folded=False, one_line=True, superset=''),
    ('sk-[A-Za-z0-9-_]*[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}', 32):
        Gate(literals=('T3BlbkFJ',), folded=False, one_line=True, superset=''),
    ('pypi-AgEIcHlwaS5vcmc[A-Za-z0-9-_]{70,}', 32):
        Gate(literals=('pypi-AgEIcHlwaS5vcmc',), folded=False, one_line=True, superset=''),
    ('pypi-AgENdGVzdC5weXBpLm9yZw[A-Za-z0-9-_]{70,}', 32):
        Gate(literals=('pypi-AgENdGVzdC5weXBpLm9yZw',), folded=False, one_line=True, superset=''),
    ('SG\\.[a-zA-Z0-9_-]{22}\\.[a-zA-Z0-9_-]{43}', 32):
        Gate(literals=('SG.',), folded=False, one_line=True, superset=''),
    ('xox(?:a|b|p|o|s|r)-(?:\\d+-)+[a-z0-9]+', 34):
        Gate(literals=('xoxa-', 'xoxb-', 'xoxo-', 'xoxp-', 'xoxr-', 'xoxs-'), folded=True, one_line=True, superset=''),
    ('https://hooks\\.slack\\.com/services/T[a-zA-Z0-9_]+/B[a-zA-Z0-9_]+/[a-zA-Z0-9_]+', 98):
        Gate(literals=('https://hooks.slack.com/services/t',), folded=True, one_line=True, superset=''),
    ('sq0csp-[0-9A-Za-z\\\\\\-_]{43}', 32):
        Gate(literals=('sq0csp-',), folded=False, one_line=True, superset=''),
    ('(?:r|s)k_live_[0-9a-zA-Z]{24}', 32):
        Gate(literals=('rk_live_', 'sk_live_'), folded=False, one_line=True, superset=''),
    ('\\d{8,10}:[0-9A-Za-z_-]{35}', 32):
        Gate(literals=(':',), folded=False, one_line=True, superset='(?:[0-9]|[^\\x00-\\x7f]){8}:[0-9A-Za-z_-]{35}'),
    ('AC[a-z0-9]{32}', 32):
        Gate(literals=('AC',), folded=False, one_line=True, superset=''),
    ('SK[a-z0-9]{32}', 32):
        Gate(literals=('SK',), folded=False, one_line=True, superset=''),
    ('-----BEGIN (?:[A-Z0-9]{1,16} ){0,3}PRIVATE KEY(?: BLOCK)?-----(?:[A-Za-z0-9+/=:,.\\s\\\\]|-(?!-)){0,65536}?-----END (?:[A-Z0-9]{1,16} ){0,3}PRIVATE KEY(?: BLOCK)?-----', 32):
        Gate(literals=('PRIVATE KEY BLOCK-----', 'PRIVATE KEY-----'), folded=False, one_line=False, superset=''),
    ('-----BEGIN (?:[A-Z0-9]{1,16} ){0,3}PRIVATE KEY(?: BLOCK)?-----(?:(?:\\\\r)?(?:\\\\n)|\\r?\\n|[ \\t]){1,4}(?:[A-Za-z0-9+/=:\\-]{1,100}(?:(?:\\\\r)?(?:\\\\n)|\\r?\\n)){0,1000}[A-Za-z0-9+/=]{0,100}', 32):
        Gate(literals=('PRIVATE KEY BLOCK-----\t', 'PRIVATE KEY BLOCK-----\n', 'PRIVATE KEY BLOCK-----\r\n', 'PRIVATE KEY BLOCK----- ', 'PRIVATE KEY BLOCK-----\\n', 'PRIVATE KEY BLOCK-----\\r\\n', 'PRIVATE KEY-----\t', 'PRIVATE KEY-----\n', 'PRIVATE KEY-----\r\n', 'PRIVATE KEY----- ', 'PRIVATE KEY-----\\n', 'PRIVATE KEY-----\\r\\n'), folded=False, one_line=False, superset=''),
    ('PuTTY-User-Key-File-[23]: [^\\r\\n]{0,256}(?:\\r?\\n|\\\\n)(?:[A-Za-z-]{1,32}: [^\\r\\n\\\\]{0,4096}(?:\\r?\\n|\\\\n)){0,200}', 32):
        Gate(literals=('PuTTY-User-Key-File-2: ', 'PuTTY-User-Key-File-3: '), folded=False, one_line=False, superset=''),
    ('(?<![\\w-])eyJ[\\w-]{8,4096}+={0,2}\\.eyJ[\\w-]{8,8192}+={0,2}\\.[\\w-]{0,1024}+={0,2}', 256):
        Gate(literals=('.eyJ',), folded=False, one_line=True, superset=''),
    ('github_pat_[A-Za-z0-9_]{22,255}', 32):
        Gate(literals=('github_pat_',), folded=False, one_line=True, superset=''),
    ('gh[pousr]_[A-Za-z0-9]{36,251}', 32):
        Gate(literals=('gho_', 'ghp_', 'ghr_', 'ghs_', 'ghu_'), folded=False, one_line=True, superset=''),
    ('sk-(?:ant-[a-z]{2,8}\\d{2}-|proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,256}', 32):
        Gate(literals=('sk-',), folded=False, one_line=True, superset=''),
    ('AIza[0-9A-Za-z_-]{35}(?![\\w-])', 32):
        Gate(literals=('AIza',), folded=False, one_line=True, superset=''),
    ('[sr]k_(?:live|test|prod)_[0-9a-zA-Z]{16,256}', 32):
        Gate(literals=('rk_live_', 'rk_prod_', 'rk_test_', 'sk_live_', 'sk_prod_', 'sk_test_'), folded=False, one_line=True, superset=''),
    ('xox[abposre]-[A-Za-z0-9-]{10,255}', 32):
        Gate(literals=('xoxa-', 'xoxb-', 'xoxe-', 'xoxo-', 'xoxp-', 'xoxr-', 'xoxs-'), folded=False, one_line=True, superset=''),
    ('xapp-\\d-[A-Z0-9]{1,32}-\\d{1,32}-[a-z0-9]{16,128}', 32):
        Gate(literals=('xapp-',), folded=False, one_line=True, superset=''),
    ('[Bb](?i:earer)\\s{1,8}([A-Za-z0-9._~+/-]{16,8192}+=*)', 32):
        Gate(literals=('bearer',), folded=True, one_line=False, superset=''),
    ('[Bb](?i:asic)[ \\t]{1,8}([A-Za-z0-9+/]{8,8192}+={0,2})', 32):
        Gate(literals=('basic\t', 'basic '), folded=True, one_line=True, superset=''),
    ('(?:-u|--user)[ \\t]{1,8}\\\\{0,3}["\']?[^\\s:\'"\\\\]{1,256}:(?P<v>[^\\s\'"\\\\]{1,4096}+)', 32):
        Gate(literals=('--user\t', '--user ', '-u\t', '-u '), folded=False, one_line=True, superset=''),
    ('[A-Za-z][A-Za-z0-9+.-]{1,20}://[^\\s:/?#\\[\\]@\\\\\\"\'<>]{0,256}+:(?P<v>[^\\s/?#\\\\\\"<>]{1,1024})@(?=[A-Za-z0-9\\[])', 32):
        Gate(literals=('://',), folded=False, one_line=True, superset=''),
    ('--?(?:[A-Za-z0-9]{1,32}[_-]){0,4}(?:[Pp](?i:ass(?:wd|word|phrase)|wd|rivate[_-]?key)|[Ss](?i:ecret)|[Tt](?i:oken)|[Aa](?i:pi[_-]?key|pikey|ccess[_-]?key)|[Cc](?i:lient[_-]?secret|redentials?))(?:[_-](?i:id|key|value))?(?:=|[ \\t]{1,8})(?P<q>\\\\{0,15}["\'])?', 32):
        Gate(literals=('access-key', 'access_key', 'accesskey', 'api-key', 'api_key', 'apikey', 'client-secret', 'client_secret', 'clientsecret', 'credential', 'credentials', 'passphrase', 'passwd', 'password', 'private-key', 'private_key', 'privatekey', 'pwd', 'secret', 'token'), folded=True, one_line=True, superset=''),
    ('mysql(?:dump|admin)?[ \\t][^\\r\\n|;&]{0,256}?[ \\t]-p(?P<v>[^\\s\'"\\\\-][^\\s\'"\\\\]{0,1024}+)', 32):
        Gate(literals=('mysql\t', 'mysql ', 'mysqladmin\t', 'mysqladmin ', 'mysqldump\t', 'mysqldump '), folded=False, one_line=True, superset=''),
    ('configure[ \\t]{1,8}set[ \\t]{1,8}(?:--[a-z-]{1,32}[ \\t]{1,8}\\S{1,64}[ \\t]{1,8})?(?P<name>[\\w.-]{1,80})[ \\t]{1,8}(?P<q>\\\\{0,15}["\'])?', 32):
        Gate(literals=('configure\t', 'configure '), folded=False, one_line=True, superset=''),
    ('login(?:[ \\t]|\\r?\\n|\\\\n){1,16}\\S{1,256}?(?:[ \\t]|\\r?\\n|\\\\n){1,16}password[ \\t]{1,8}(?P<q>\\\\{0,15}["\'])?', 32):
        Gate(literals=('password\t', 'password '), folded=False, one_line=False, superset=''),
    ('(?:[Pp](?i:ass(?:wd|word|phrase)|wd|rivate[_-]?key)|[Ss](?i:ecret)|[Tt](?i:oken)|[Aa](?i:pi[_-]?key|pikey|ccess[_-]?key)|[Cc](?i:lient[_-]?secret|redentials?))(?:[_-](?i:id|key|value))?(?:\\\\{0,15}["\'])?[ \\t]{0,8}(?::=|=>|[:=])[ \\t]{0,8}(?P<q>\\\\{0,15}["\'])?', 32):
        Gate(literals=('access-key', 'access_key', 'accesskey', 'api-key', 'api_key', 'apikey', 'client-secret', 'client_secret', 'clientsecret', 'credential', 'credentials', 'passphrase', 'passwd', 'password', 'private-key', 'private_key', 'privatekey', 'pwd', 'secret', 'token'), folded=True, one_line=True, superset=''),
    ('(?:A3T[A-Z0-9]|ABIA|ACCA|AKIA|ASIA)[0-9A-Z]{16}[\\s,;:|\\"\'=\\\\]{1,8}(?<![A-Za-z0-9+/=])(?P<v>[A-Za-z0-9+/]{40})(?![A-Za-z0-9+/=])', 32):
        Gate(literals=('A3T', 'ABIA', 'ACCA', 'AKIA', 'ASIA'), folded=False, one_line=False, superset=''),
    ('[Ss](?i:ecret[ _-]?access[ _-]?key)[^\\r\\n\\\\]{0,64}?(?<![A-Za-z0-9+/=])(?P<v>[A-Za-z0-9+/]{40})(?![A-Za-z0-9+/=])', 32):
        Gate(literals=('secret access key', 'secret access-key', 'secret access_key', 'secret accesskey', 'secret-access key', 'secret-access-key', 'secret-access_key', 'secret-accesskey', 'secret_access key', 'secret_access-key', 'secret_access_key', 'secret_accesskey', 'secretaccess key', 'secretaccess-key', 'secretaccess_key', 'secretaccesskey'), folded=True, one_line=True, superset=''),
    ('(?<![\\w+/=.%-])[A-Z][A-Z0-9_]{1,80}=(?P<q>\\\\{0,15}["\'])?', 32):
        Gate(literals=('=',), folded=False, one_line=True, superset=''),
}
