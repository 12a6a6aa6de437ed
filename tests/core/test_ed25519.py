# Ed25519 (RFC 8032) of tinyssb.ed25519: known answers and libsodium's verdicts. Runs under
# pytest and under MicroPython (tools/mptest.py): plain functions and asserts only.
from binascii import unhexlify

from tinyssb import ed25519 as E

if E.VIPER:
    from tinyssb import ed25519_viper as N
from tinyssb.sha512 import sha512

# RFC 8032 section 7.1: (secret seed, public key, message, signature), hex.
RFC8032 = (
    ("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
     "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
     "",
     "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155"
     "5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"),
    ("4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
     "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
     "72",
     "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da"
     "085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"),
    ("c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
     "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025",
     "af82",
     "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac"
     "18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a"),
    # TEST SHA(abc): the message is SHA-512("abc").
    ("833fe62409237b9d62ec77587520911e9a759cec1d19755b7da901b96dca3d42",
     "ec172b93ad5e563bf4932c70e1245034c35467ef2efd4d64ebf819683467e2bf",
     "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a"
     "2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f",
     "dc2a4459e7369633a52b1bf277839a00201009a3efbf3ecb69bea2186c26b589"
     "09351fc9ac90b3ecfdfbc7c66431e0303dca179c138ac17ad9bef1177331a704"),
)

# RFC 8032 TEST 1024 (a 1023-byte message).
TEST1024_SEED = "f5e5767cf153319517630f226876b86c8160cc583bc013744c6bf255f5cc0ee5"
TEST1024_PUB = "278117fc144c72340f67d0f2316e8386ceffbf2b2428c9c51fef7c597f1d426e"
TEST1024_SIG = ("0aab4c900501b3e24d7cdf4663326a3a87df5e4843b2cbdb67cbf6e460fec350"
                "aa5371b1508f9f4528ecea23c436d94b5e8fcd4f681e30a6ac00a9704a188a03")
TEST1024_MSG = (
    "08b8b2b733424243760fe426a4b54908632110a66c2f6591eabd3345e3e4eb98"
    "fa6e264bf09efe12ee50f8f54e9f77b1e355f6c50544e23fb1433ddf73be84d8"
    "79de7c0046dc4996d9e773f4bc9efe5738829adb26c81b37c93a1b270b20329d"
    "658675fc6ea534e0810a4432826bf58c941efb65d57a338bbd2e26640f89ffbc"
    "1a858efcb8550ee3a5e1998bd177e93a7363c344fe6b199ee5d02e82d522c4fe"
    "ba15452f80288a821a579116ec6dad2b3b310da903401aa62100ab5d1a36553e"
    "06203b33890cc9b832f79ef80560ccb9a39ce767967ed628c6ad573cb116dbef"
    "efd75499da96bd68a8a97b928a8bbc103b6621fcde2beca1231d206be6cd9ec7"
    "aff6f6c94fcd7204ed3455c68c83f4a41da4af2b74ef5c53f1d8ac70bdcb7ed1"
    "85ce81bd84359d44254d95629e9855a94a7c1958d1f8ada5d0532ed8a5aa3fb2"
    "d17ba70eb6248e594e1a2297acbbb39d502f1a8c6eb6f1ce22b3de1a1f40cc24"
    "554119a831a9aad6079cad88425de6bde1a9187ebb6092cf67bf2b13fd65f270"
    "88d78b7e883c8759d2c4f5c65adb7553878ad575f9fad878e80a0c9ba63bcbcc"
    "2732e69485bbc9c90bfbd62481d9089beccf80cfe2df16a2cf65bd92dd597b07"
    "07e0917af48bbb75fed413d238f5555a7a569d80c3414a8d0859dc65a46128ba"
    "b27af87a71314f318c782b23ebfe808b82b0ce26401d2e22f04d83d1255dc51a"
    "ddd3b75a2b1ae0784504df543af8969be3ea7082ff7fc9888c144da2af58429e"
    "c96031dbcad3dad9af0dcbaaaf268cb8fcffead94f3c7ca495e056a9b47acdb7"
    "51fb73e666c6c655ade8297297d07ad1ba5e43f1bca32301651339e22904cc8c"
    "42f58c30c04aafdb038dda0847dd988dcda6f3bfd15c4b4c4525004aa06eeff8"
    "ca61783aacec57fb3d1f92b0fe2fd1a85f6724517b65e614ad6808d6f6ee34df"
    "f7310fdc82aebfd904b01e1dc54b2927094b2db68d6f903b68401adebf5a7e08"
    "d78ff4ef5d63653a65040cf9bfd4aca7984a74d37145986780fc0b16ac451649"
    "de6188a7dbdf191f64b5fc5e2ab47b57f7f7276cd419c17a3ca8e1b939ae49e4"
    "88acba6b965610b5480109c8b17b80e1b7b750dfc7598d5d5011fd2dcc5600a3"
    "2ef5b52a1ecc820e308aa342721aac0943bf6686b64b2579376504ccc493d97e"
    "6aed3fb0f9cd71a43dd497f01f17c0e2cb3797aa2a2f256656168e6c496afc5f"
    "b93246f6b1116398a346f1a641f3b041e989f7914f90cc2c7fff357876e506b5"
    "0d334ba77c225bc307ba537152f3f1610e4eafe595f6d9d90d11faa933a15ef1"
    "369546868a7f3a45a96768d40fd9d03412c091c6315cf4fde7cb68606937380d"
    "b2eaaa707b4c4185c32eddcdd306705e4dc1ffc872eeee475a64dfac86aba41c"
    "0618983f8741c5ef68d3a101e8a3b8cac60c905c15fc910840b94c00a0b9d0"
)

# Edge cases with libsodium's verdict (crypto_sign_verify_detached via PyNaCl), built by
# hand: (what, public key, message, signature, libsodium accepts). "equation holds" means
# [S]B = R + [h]A is true as points, so only libsodium's extra rules reject.
LIBSODIUM = (
    ("mixed-order key, torsion cancels",
     "74bf11d4c0fb1fcdabdb4f3f1e90cf8db513e99b3723bfc2e9a6be4d0193fc26",
     "6d697865642036",
     "08aa8eab27aad4af614ee55f964cea9ddcb0bef7ff6544802a2f5783eb6c3e0a011f2022108999e14f573c5c59241144a05abb8015f01b019b87c3dddcacfb0c", True),
    ("mixed-order key, torsion left",
     "74bf11d4c0fb1fcdabdb4f3f1e90cf8db513e99b3723bfc2e9a6be4d0193fc26",
     "6d697865642030",
     "08aa8eab27aad4af614ee55f964cea9ddcb0bef7ff6544802a2f5783eb6c3e0ae0fdf39cad4961d611a79d9e3dc85be6066cbea8bb76396c5e5b87e5a463810f", False),
    ("small-order R, equation holds",
     "74bf11d4c0fb1fcdabdb4f3f1e90cf8db513e99b3723bfc2e9a6be4d0193fc26",
     "736d616c6c20522032",
     "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85b45cd46d648f27e9a3cb850a57c263e3612782cb8d1d8e30178bc338c6635805", False),
    ("identity key, equation holds",
     "0100000000000000000000000000000000000000000000000000000000000000",
     "6964",
     "a397ce3e4b575993a1ec217c1298430adf7126a4316992d5be6e51c038c842b9ff5ef301cb4cda6c9ce7293477dcce5c127554fd20f2e1eed18ac888550c9602", False),
    ("valid",
     "ea4a6c63e29c520abef5507b132ec5f9954776aebebe7b92421eea691446d22c",
     "726564756365",
     "5de20ae9d4d99c36cd4cd63bee0117cf2f43ce9dbaa120e257bc127c17fd23a46c345af30ea4fb1a0f579a133ee16303657225ac8924a3f4de9a34d042676e00", True),
    ("S + L, equation holds",
     "ea4a6c63e29c520abef5507b132ec5f9954776aebebe7b92421eea691446d22c",
     "726564756365",
     "5de20ae9d4d99c36cd4cd63bee0117cf2f43ce9dbaa120e257bc127c17fd23a45908505029070e73e5f391b61cdb4218657225ac8924a3f4de9a34d042676e10", False),
)


# More edge cases with libsodium's verdicts (tests/host/test_crypto_nacl.py builds them with
# its independent curve arithmetic and checks each verdict against PyNaCl): every encoding
# libsodium treats as a small-order key and every small-order R, each with the group
# equation satisfied; S out of range; R and A with y >= p or off the curve; sign bits.
EDGES = (
    ('small-order key 0000..00, equation holds',
     '0000000000000000000000000000000000000000000000000000000000000000',
     '6d34',
     '9d6de62850cbe584378d8333d83c250e337f0b0c63c3cfc1e382746f959d8b796bad39f4c2aaed1a8a27e534ce4aa7426078fe43c27a88b4ada9dd74d20a2104', False),
    ('small-order key 0000..80, equation holds',
     '0000000000000000000000000000000000000000000000000000000000000080',
     '6d31',
     '4a80cb21f2ce7dbf8930aea153b1adae926ae8a931cbeada7f4d32bfecd81157242cae48c88fff9b500f0b4cca8e9f33a72971aa44125c7294d11bb5720b3e06', False),
    ('small-order key 0100..00, equation holds',
     '0100000000000000000000000000000000000000000000000000000000000000',
     '6d30',
     'e34a31777fdd32e872a34af43849ff3975fa587a8ca7047491e1f7c1b551d589da9a08e47ccc61a0c7fd186f5fc43b369986715a5578f834b4324705bd244509', False),
    ('small-order key 0100..80, equation holds',
     '0100000000000000000000000000000000000000000000000000000000000080',
     '6d30',
     '6f8086dd67afaa70e1f2264e1a9c63cdcace620c9c8ee2e9843492a459f496190202016c9e45bf9fcd7bc5036e3c2e972bed6264cf29988e597852743154cb0a', False),
    ('small-order key 26e8..05, equation holds',
     '26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05',
     '6d30',
     '8e1681c1534357421abb896ddfb0aa1bd5964198c8598c9aa9645a6f478146e44c77fe0050ade3f673512d0695ee17f8fd13d8972f0392c0b80a3e5066c6400f', False),
    ('small-order key 26e8..85, equation holds',
     '26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85',
     '6d34',
     'a9f26c46d7e2806d54d8d15e161399b0407fd7827899451f67dc26da87297efa14b5e7857d0a0c37b8407af248c56e0c1fe9f4bdc1163d4b27a961355bd9450d', False),
    ('small-order key c717..7a, equation holds',
     'c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a',
     '6d3130',
     '166d38d429d0027dde113617ae4f6615077957bd7bc987b88a071a843bf587b51bb405cc295e1e9e307c739d83664b2259de939351012a121212c10a49014a01', False),
    ('small-order key c717..fa, equation holds',
     'c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa',
     '6d32',
     '084e025a7479526c6493de470c2f30829d276761789de59f3c1f1a0c9f66fc4df517eccb0e89c5cf84761a5978a1f11fcdccd4d174e6c726ce04f0e2dc0ce502', False),
    ('small-order key ecff..7f, equation holds',
     'ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
     '6d30',
     '43d5c2ca8e846165fbdea9f8c31e73a54b78b21dbc4bb0c7412e5d945f0a63e321917875652ee1ac97a229a1f7d2e8b7de7810be457f2f7ff1805355ffebf607', False),
    ('small-order key ecff..ff, equation holds',
     'ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff',
     '6d31',
     '5853f17c5f322c98deab0e27ce5f4bc9012a63348e31ea2691663bfe0a83ff779b36bbfdf02738c80da9f28625665ad61734d49d078bfd88ac7eb7af5429af05', False),
    ('small-order key edff..7f, equation holds',
     'edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
     '6d36',
     'eb18211655c2a0482fc35f4deaab756e85653d64135bb7f6161eb6590fa73a238e1613ce3c32923fc658eac66a8040cf5efb61aee99951d591629abb48179e00', False),
    ('small-order key eeff..7f, equation holds',
     'eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
     '6d30',
     '2f2dc601691cc5c33cc01aa0c9810bef861b4faff4efec9d074184681fe8dd45fec3b49e90d1facf1bf29e0c02a177db5d9df5b1c0a2dbd0a3775bdf4fd8650b', False),
    ('small-order R (k=1), equation holds',
     'c0ea676dde4dd01732e981f6a71a2b0aaf5a5e11dcb561f83a2aa86ef27a9c2d',
     '72312d36',
     'c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa8451569dec558fc10d581d6c397d11efd636ca441d9af44f5dbd02083898df0a', False),
    ('small-order R (k=2), equation holds',
     'c0ea676dde4dd01732e981f6a71a2b0aaf5a5e11dcb561f83a2aa86ef27a9c2d',
     '72322d38',
     '000000000000000000000000000000000000000000000000000000000000000033f471d22a65e2181550636e2bf01e2b21f8657a3e2202395295a163182b9d0c', False),
    ('small-order R (k=3), equation holds',
     'c0ea676dde4dd01732e981f6a71a2b0aaf5a5e11dcb561f83a2aa86ef27a9c2d',
     '72332d38',
     '26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc8594b5a48c14cbdc1632a1e2a6287ce713ff3c9318d28fae04d70b00145fc4340e', False),
    ('small-order R (k=4), equation holds',
     'c0ea676dde4dd01732e981f6a71a2b0aaf5a5e11dcb561f83a2aa86ef27a9c2d',
     '72342d3136',
     'ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f2cb64145d809d604240e059f7bb57ebd1936ae6adc946e0c7a1b05f4fab73b00', False),
    ('small-order R (k=5), equation holds',
     'c0ea676dde4dd01732e981f6a71a2b0aaf5a5e11dcb561f83a2aa86ef27a9c2d',
     '72352d32',
     '26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc052bce0016730ed41e1dc5e012a668c4c9e7c1194701b13b691e3151c455e3ba08', False),
    ('small-order R (k=6), equation holds',
     'c0ea676dde4dd01732e981f6a71a2b0aaf5a5e11dcb561f83a2aa86ef27a9c2d',
     '72362d30',
     '0000000000000000000000000000000000000000000000000000000000000080ada86914dbc0968442d00675df518c34abd1d9a9ba3bd0a6e27823e59f38af0f', False),
    ('small-order R (k=7), equation holds',
     'c0ea676dde4dd01732e981f6a71a2b0aaf5a5e11dcb561f83a2aa86ef27a9c2d',
     '72372d3130',
     'c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037acf63c094a48a6484939bd981688b927c550e01648faf0b0ab1558d897c142205', False),
    ('valid',
     '0bbc346a57667c380120bd9c7fd7e51d2c5fdfea37cd2f5bf405b2c6bf6f2d78',
     '74696e797373622065646765',
     'c0e7fb8c427e4792b4746292d53a1d77558363c32b635545f20114658b8f94195279639c0f870f7867d1f18847ab213db427da9f6210aa88837627ca0ec52c04', True),
    ('S + L',
     '0bbc346a57667c380120bd9c7fd7e51d2c5fdfea37cd2f5bf405b2c6bf6f2d78',
     '74696e797373622065646765',
     'c0e7fb8c427e4792b4746292d53a1d77558363c32b635545f20114658b8f94193f4d59f929ea21d03d6ee92b26a50052b427da9f6210aa88837627ca0ec52c14', False),
    ('S = L',
     '0bbc346a57667c380120bd9c7fd7e51d2c5fdfea37cd2f5bf405b2c6bf6f2d78',
     '74696e797373622065646765',
     'c0e7fb8c427e4792b4746292d53a1d77558363c32b635545f20114658b8f9419edd3f55c1a631258d69cf7a2def9de1400000000000000000000000000000010', False),
    ('S = 2^256 - 1',
     '0bbc346a57667c380120bd9c7fd7e51d2c5fdfea37cd2f5bf405b2c6bf6f2d78',
     '74696e797373622065646765',
     'c0e7fb8c427e4792b4746292d53a1d77558363c32b635545f20114658b8f9419ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff', False),
    ('S with bit 255',
     '0bbc346a57667c380120bd9c7fd7e51d2c5fdfea37cd2f5bf405b2c6bf6f2d78',
     '74696e797373622065646765',
     'c0e7fb8c427e4792b4746292d53a1d77558363c32b635545f20114658b8f94195279639c0f870f7867d1f18847ab213db427da9f6210aa88837627ca0ec52c84', False),
    ("R's y = p + 0",
     '0bbc346a57667c380120bd9c7fd7e51d2c5fdfea37cd2f5bf405b2c6bf6f2d78',
     '74696e797373622065646765',
     'edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f5279639c0f870f7867d1f18847ab213db427da9f6210aa88837627ca0ec52c04', False),
    ("R's y = p + 1",
     '0bbc346a57667c380120bd9c7fd7e51d2c5fdfea37cd2f5bf405b2c6bf6f2d78',
     '74696e797373622065646765',
     'eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f5279639c0f870f7867d1f18847ab213db427da9f6210aa88837627ca0ec52c04', False),
    ("R's y = p + 5",
     '0bbc346a57667c380120bd9c7fd7e51d2c5fdfea37cd2f5bf405b2c6bf6f2d78',
     '74696e797373622065646765',
     'f2ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f5279639c0f870f7867d1f18847ab213db427da9f6210aa88837627ca0ec52c04', False),
    ("R's y = p + 18",
     '0bbc346a57667c380120bd9c7fd7e51d2c5fdfea37cd2f5bf405b2c6bf6f2d78',
     '74696e797373622065646765',
     'ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f5279639c0f870f7867d1f18847ab213db427da9f6210aa88837627ca0ec52c04', False),
    ("R's sign bit flipped",
     '0bbc346a57667c380120bd9c7fd7e51d2c5fdfea37cd2f5bf405b2c6bf6f2d78',
     '74696e797373622065646765',
     'c0e7fb8c427e4792b4746292d53a1d77558363c32b635545f20114658b8f94995279639c0f870f7867d1f18847ab213db427da9f6210aa88837627ca0ec52c04', False),
    ("A's y = p + 2, sign 0",
     'efffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
     '74696e797373622065646765',
     'c0e7fb8c427e4792b4746292d53a1d77558363c32b635545f20114658b8f94195279639c0f870f7867d1f18847ab213db427da9f6210aa88837627ca0ec52c04', False),
    ("A's y = p + 2, sign 1",
     'efffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff',
     '74696e797373622065646765',
     'c0e7fb8c427e4792b4746292d53a1d77558363c32b635545f20114658b8f94195279639c0f870f7867d1f18847ab213db427da9f6210aa88837627ca0ec52c04', False),
    ("A's y = p + 3, sign 0",
     'f0ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
     '74696e797373622065646765',
     'c0e7fb8c427e4792b4746292d53a1d77558363c32b635545f20114658b8f94195279639c0f870f7867d1f18847ab213db427da9f6210aa88837627ca0ec52c04', False),
    ("A's y = p + 3, sign 1",
     'f0ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff',
     '74696e797373622065646765',
     'c0e7fb8c427e4792b4746292d53a1d77558363c32b635545f20114658b8f94195279639c0f870f7867d1f18847ab213db427da9f6210aa88837627ca0ec52c04', False),
    ("A's y = p + 9, sign 0",
     'f6ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
     '74696e797373622065646765',
     'c0e7fb8c427e4792b4746292d53a1d77558363c32b635545f20114658b8f94195279639c0f870f7867d1f18847ab213db427da9f6210aa88837627ca0ec52c04', False),
    ("A's y = p + 9, sign 1",
     'f6ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff',
     '74696e797373622065646765',
     'c0e7fb8c427e4792b4746292d53a1d77558363c32b635545f20114658b8f94195279639c0f870f7867d1f18847ab213db427da9f6210aa88837627ca0ec52c04', False),
    ("A's y = p + 18, sign 0",
     'ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
     '74696e797373622065646765',
     'c0e7fb8c427e4792b4746292d53a1d77558363c32b635545f20114658b8f94195279639c0f870f7867d1f18847ab213db427da9f6210aa88837627ca0ec52c04', False),
    ("A's y = p + 18, sign 1",
     'ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff',
     '74696e797373622065646765',
     'c0e7fb8c427e4792b4746292d53a1d77558363c32b635545f20114658b8f94195279639c0f870f7867d1f18847ab213db427da9f6210aa88837627ca0ec52c04', False),
    ('A off the curve (y = 2)',
     '0200000000000000000000000000000000000000000000000000000000000000',
     '74696e797373622065646765',
     'c0e7fb8c427e4792b4746292d53a1d77558363c32b635545f20114658b8f94195279639c0f870f7867d1f18847ab213db427da9f6210aa88837627ca0ec52c04', False),
    ('R off the curve (y = 2)',
     '0bbc346a57667c380120bd9c7fd7e51d2c5fdfea37cd2f5bf405b2c6bf6f2d78',
     '74696e797373622065646765',
     '02000000000000000000000000000000000000000000000000000000000000005279639c0f870f7867d1f18847ab213db427da9f6210aa88837627ca0ec52c04', False),
    ('A off the curve (y = 7)',
     '0700000000000000000000000000000000000000000000000000000000000000',
     '74696e797373622065646765',
     'c0e7fb8c427e4792b4746292d53a1d77558363c32b635545f20114658b8f94195279639c0f870f7867d1f18847ab213db427da9f6210aa88837627ca0ec52c04', False),
    ('R off the curve (y = 7)',
     '0bbc346a57667c380120bd9c7fd7e51d2c5fdfea37cd2f5bf405b2c6bf6f2d78',
     '74696e797373622065646765',
     '07000000000000000000000000000000000000000000000000000000000000005279639c0f870f7867d1f18847ab213db427da9f6210aa88837627ca0ec52c04', False),
    ('A off the curve (y = 8)',
     '0800000000000000000000000000000000000000000000000000000000000000',
     '74696e797373622065646765',
     'c0e7fb8c427e4792b4746292d53a1d77558363c32b635545f20114658b8f94195279639c0f870f7867d1f18847ab213db427da9f6210aa88837627ca0ec52c04', False),
    ('R off the curve (y = 8)',
     '0bbc346a57667c380120bd9c7fd7e51d2c5fdfea37cd2f5bf405b2c6bf6f2d78',
     '74696e797373622065646765',
     '08000000000000000000000000000000000000000000000000000000000000005279639c0f870f7867d1f18847ab213db427da9f6210aa88837627ca0ec52c04', False),
    ("A's sign bit flipped",
     '0bbc346a57667c380120bd9c7fd7e51d2c5fdfea37cd2f5bf405b2c6bf6f2df8',
     '74696e797373622065646765',
     'c0e7fb8c427e4792b4746292d53a1d77558363c32b635545f20114658b8f94195279639c0f870f7867d1f18847ab213db427da9f6210aa88837627ca0ec52c04', False),
)


def _b(h):
    return unhexlify(h)


def _engines():
    """The engines to check: the plain one, and the native one where it exists."""
    return (False, True) if E.VIPER else (False,)


def test_rfc8032_vectors():
    for engine in _engines():
        E.use_viper(engine)
        for seed, pub, msg, sig in RFC8032:
            seed, pub, msg, sig = _b(seed), _b(pub), _b(msg), _b(sig)
            assert E.publickey(seed) == pub
            assert E.sign(seed, msg) == sig
            assert E.sign(seed, msg, pub) == sig
            assert E.verify(pub, msg, sig) is True
    E.use_viper(True)


def test_rfc8032_1023_byte_message():
    msg = _b(TEST1024_MSG)
    assert len(msg) == 1023
    seed, pub, sig = _b(TEST1024_SEED), _b(TEST1024_PUB), _b(TEST1024_SIG)
    for engine in _engines():
        E.use_viper(engine)
        assert E.publickey(seed) == pub
        assert E.sign(seed, msg, pub) == sig
        assert E.verify(pub, msg, sig)
        assert not E.verify(pub, msg[:-1], sig)
    E.use_viper(True)


def _stream(tag, n):
    """n deterministic pseudo-random bytes (SHA-512 in counter mode), the same on every
    port (MicroPython's random has no randbytes)."""
    out = b""
    i = 0
    while len(out) < n:
        out += sha512(tag + str(i).encode())
        i += 1
    return out[:n]


def test_engines_agree_on_random_keys_and_messages():
    # Same keys and signatures from both engines; every valid signature verifies in both
    # and a flipped bit in the signature, the message or the key fails in both.
    for i in range(6):
        seed = _stream(b"seed", 32 + i)[i:]
        msg = _stream(b"msg %d" % i, (0, 1, 64, 120, 200, 300)[i])
        out = []
        for engine in _engines():
            E.use_viper(engine)
            E.clear_cache()
            pub = E.publickey(seed)
            sig = E.sign(seed, msg, pub)
            assert E.verify(pub, msg, sig)
            bit = _stream(b"bit %d" % i, 1)[0]
            bad = bytearray(sig)
            bad[bit % 64] ^= 1 << (bit & 7)
            assert not E.verify(pub, msg, bytes(bad))
            assert not E.verify(pub, msg + b"\0", sig)
            bad = bytearray(pub)
            bad[bit % 32] ^= 1 << (bit & 7)
            assert not E.verify(bytes(bad), msg, sig)
            out.append((pub, sig))
        assert out[0] == out[-1], i
    E.use_viper(True)


def test_libsodium_verdicts():
    for engine in _engines():
        E.use_viper(engine)
        for what, pub, msg, sig, ok in LIBSODIUM + EDGES:
            E.clear_cache()
            assert E.verify(_b(pub), _b(msg), _b(sig)) is ok, (engine, what)
            assert E.verify(_b(pub), _b(msg), _b(sig)) is ok, (engine, what, "cached key")
    E.use_viper(True)


def test_tampered_signature_message_or_key_rejected():
    seed, pub, msg, sig = [_b(x) for x in RFC8032[2]]
    for i in (0, 17, 31, 32, 45, 63):
        for bit in (0, 7):
            bad = bytearray(sig)
            bad[i] ^= 1 << bit
            assert not E.verify(pub, msg, bytes(bad)), (i, bit)
    assert not E.verify(pub, b"\xaf\x83", sig)
    assert not E.verify(pub, msg + b"\0", sig)
    assert not E.verify(pub, b"", sig)
    for i in (0, 31):
        bad = bytearray(pub)
        bad[i] ^= 1
        assert not E.verify(bytes(bad), msg, sig), i
    # Another valid key's signature of the same message does not transfer.
    other = _b(RFC8032[1][0])
    assert not E.verify(pub, msg, E.sign(other, msg))


def test_malformed_inputs_return_false():
    seed, pub, msg, sig = [_b(x) for x in RFC8032[0]]
    cases = ((pub[:31], msg, sig), (pub + b"\0", msg, sig), (pub, msg, sig[:63]),
             (pub, msg, sig + b"\0"), (None, msg, sig), (pub, None, sig), (pub, msg, None),
             (b"", b"", b""), (5, 6, 7), (pub, msg, b"\xff" * 64), (b"\xff" * 32, msg, sig),
             (pub, 0, sig), (pub, "", sig))
    for args in cases:
        assert E.verify(*args) is False
    assert E.verify(bytearray(pub), memoryview(msg), bytearray(sig)) is True


def test_sign_and_publickey_reject_bad_lengths():
    for bad in (b"", b"\0" * 31, b"\0" * 33):
        try:
            E.publickey(bad)
        except ValueError:
            pass
        else:
            raise AssertionError("publickey accepted %d bytes" % len(bad))
        try:
            E.sign(bad, b"m")
        except ValueError:
            pass
        else:
            raise AssertionError("sign accepted %d bytes" % len(bad))


def test_curve_constants():
    p = E.P
    assert E.D == (-121665 * pow(121666, p - 2, p)) % p
    assert E.D2 == 2 * E.D % p
    assert E.SQRT_M1 * E.SQRT_M1 % p == p - 1
    # B satisfies -x^2 + y^2 = 1 + d x^2 y^2 and y = 4/5.
    x, y = E.BX, E.BY
    assert (y * y - x * x - 1 - E.D * x * x * y * y) % p == 0
    assert y * 5 % p == 4
    # [L]B is the identity (0, 1): L is B's order.
    tb = E._key_table(E.BX, E.BY, 1 << (E.BASE_WINDOW - 2))
    X, Y, Z = E._double_add(E._wnaf(E.L, E.BASE_WINDOW), None, tb, None)
    assert X % p == 0 and (Y - Z) % p == 0


def test_small_order_y_list_is_the_torsion():
    # Each listed canonical y (other than p - 1 and 0, 1) decodes to a point of order 8.
    p = E.P
    for y in E._SMALL_ORDER_Y[2:4]:
        x, y2 = E._decode_xy(y.to_bytes(32, "little"))
        tab = E._key_table(x, y2, 1)
        zero = E._wnaf(0, 5)
        X, Y, Z = E._double_add(zero, E._wnaf(8, 5), tab, tab)
        assert X % p == 0 and (Y - Z) % p == 0          # [8]P = 0
        X, Y, Z = E._double_add(zero, E._wnaf(4, 5), tab, tab)
        assert not (X % p == 0 and (Y - Z) % p == 0)    # [4]P != 0


def _wnaf_value(d):
    v = 0
    for i in range(len(d) - 1, -1, -1):
        v = 2 * v + d[i]
    return v


def test_wnaf_digits():
    ks = [0, 1, 2, 3, 15, 16, 17, 255, 2 ** 252, E.L - 1, E.L, 2 ** 255 - 1,
          0x5555555555555555555555555555555555555555555555555555555555555555]
    for w in (4, 5, 7, 8):
        for k in ks:
            d = E._wnaf(k, w)
            assert _wnaf_value(d) == k, (w, k)
            last = -w
            for i in range(len(d)):
                if d[i]:
                    assert d[i] & 1 and -(1 << (w - 1)) < d[i] < (1 << (w - 1)), (w, k, i)
                    assert i - last >= w, (w, k, i)
                    last = i


def _entries(tab):
    """A table's entries as int 4-tuples, from either engine's layout."""
    if isinstance(tab, list):
        return tab
    return [tuple(int.from_bytes(tab[o:o + 32], "little") for o in range(i, i + 128, 32))
            for i in range(0, len(tab), 128)]


def test_base_table_holds_odd_multiples():
    # Entry i is (Y+X, Y-X, 2dT, 2Z) of (2i+1)B: compare with the scalar multiple.
    p = E.P
    for engine in _engines():
        E.use_viper(engine)
        tab = _entries(E._base_table())
        assert len(tab) == 1 << (E.BASE_WINDOW - 2)
        for i in (0, 1, 5, len(tab) - 1):
            ypx, ymx, t2d, z2 = tab[i]
            zi = pow(z2, p - 2, p)
            x = (ypx - ymx) * zi % p
            y = (ypx + ymx) * zi % p
            assert t2d * zi % p == E.D * x * y % p
            assert (y | ((x & 1) << 255)).to_bytes(32, "little") == E._base_mul(2 * i + 1)
    E.use_viper(True)


def test_key_cache_is_bounded_and_transparent():
    E.clear_cache()
    sigs = []
    for i in range(E.KEY_CACHE_SIZE + 2):
        seed = bytes([i + 1]) * 32
        pub = E.publickey(seed)
        sigs.append((pub, E.sign(seed, b"entry %d" % i, pub), b"entry %d" % i))
    for _ in range(2):
        for pub, sig, msg in sigs:
            assert E.verify(pub, msg, sig)
            assert not E.verify(pub, msg + b"x", sig)
            assert len(E._cache) <= E.KEY_CACHE_SIZE
    # An invalid key is never cached.
    assert not E.verify(b"\x01" + bytes(31), b"m", bytes(64))
    assert bytes([1]) + bytes(31) not in E._cache


# --- The native engine's parts against plain Python (MicroPython only) ---------------------
# Op codes and slots as tinyssb/ed25519_viper.py numbers them; slots 13..24 are its
# temporaries, free between calls.
MUL, SQR, ADD, SUB = 0, 1, 2, 3


def _fe_put(slot, x):
    N._fe_load(N._W, slot, x.to_bytes(32, "little"), 0, 1)


def _fe_get(slot):
    out = bytearray(32)
    N._fe_store(N._W, slot, out, 0)
    return int.from_bytes(out, "little")


def _fe_run(*ops):
    prog = bytearray()
    for op in ops:
        prog.extend(bytes(op))
    prog.append(255)
    N._fe_vm(N._W, N._W, N._W, bytes(prog), 0)


def _field_values():
    """Edge values (0, 1, p - 1, p and up to 2^255 - 1 unreduced, all-ones limbs) and
    pseudo-random ones."""
    p = E.P
    vals = [0, 1, 2, 19, p - 1, p - 2, p, p + 1, p + 18, 2 ** 255 - 1, 2 ** 254,
            (2 ** 255 - 1) // 8191 * 8191, int.from_bytes(b"\xff" * 31 + b"\x7f", "little"),
            2 ** 13 - 1, 2 ** 247 - 1, E.D, E.SQRT_M1]
    for i in range(24):
        vals.append(int.from_bytes(_stream(b"fe %d" % i, 32), "little") >> (1 + i % 9))
    return vals


def test_field_engine_matches_python_ints():
    if not E.VIPER:
        return
    p = E.P
    vals = _field_values()
    for i, x in enumerate(vals):
        y = vals[(7 * i + 3) % len(vals)]
        _fe_put(13, x)
        _fe_put(14, y)
        assert _fe_get(13) == x % p
        _fe_run((MUL, 15, 13, 14), (SQR, 16, 13, 1), (ADD, 17, 13, 14), (SUB, 18, 13, 14),
                (SUB, 19, 14, 13), (SQR, 20, 13, 5), (MUL, 21, 13, 13), (SUB, 22, 0, 13))
        assert _fe_get(15) == x * y % p, (x, y)
        assert _fe_get(16) == x * x % p, x
        assert _fe_get(17) == (x + y) % p, (x, y)
        assert _fe_get(18) == (x - y) % p, (x, y)
        assert _fe_get(19) == (y - x) % p, (x, y)
        assert _fe_get(20) == pow(x, 32, p), x
        assert _fe_get(21) == x * x % p, x
        assert _fe_get(22) == -x % p, x


def test_field_engine_long_chains_stay_exact():
    # Results feed further ops without ever being re-encoded, so each op's output bound
    # must hold for every input it can produce: a long chain of mixed ops, checked
    # against Python ints at every step.
    if not E.VIPER:
        return
    p = E.P
    vals = _field_values()
    ref = {}
    for slot in range(13, 25):
        ref[slot] = vals[slot] % p
        _fe_put(slot, vals[slot])
    ops = _stream(b"chain", 1200)
    for i in range(0, len(ops), 3):
        op = ops[i] & 3
        d, x, y = 13 + ops[i] % 12, 13 + ops[i + 1] % 12, 13 + ops[i + 2] % 12
        if op == SQR:
            n = 1 + (ops[i + 2] & 3)
            _fe_run((SQR, d, x, n))
            ref[d] = pow(ref[x], 2 ** n, p)
        else:
            _fe_run((op, d, x, y))
            ref[d] = (ref[x] * ref[y], 0, ref[x] + ref[y], ref[x] - ref[y])[op] % p
        assert _fe_get(d) == ref[d], i


def test_field_store_is_canonical():
    # _fe_store reduces fully: every value from 0 to 2^255 - 1 comes out as its residue.
    if not E.VIPER:
        return
    p = E.P
    for x in (0, 1, 18, 19, 20, p - 1, p, p + 1, p + 18, 2 ** 255 - 20, 2 ** 255 - 1):
        _fe_put(13, x)
        assert _fe_get(13) == x % p, x
        _fe_run((ADD, 14, 13, 0))        # the same value after an op's loose reduction
        assert _fe_get(14) == x % p, x


def test_wnaf_engines_agree():
    if not E.VIPER:
        return
    kb = bytearray(35)
    out = bytearray(257)          # _NDIGITS (a const: not an attribute under MicroPython)
    ks = [0, 1, 2, 3, 15, 16, 17, 255, 2 ** 252, E.L - 1, E.L, 2 ** 255 - 1]
    ks += [int.from_bytes(_stream(b"k %d" % i, 32), "little") % E.L for i in range(8)]
    for w in (4, 5, 7):
        for k in ks:
            kb[:32] = k.to_bytes(32, "little")
            top = N._wnaf_v(out, kb, w)
            digits = [d - 256 if d > 127 else d for d in out]
            assert digits == E._wnaf(k, w), (w, k)
            nz = [i for i in range(257) if digits[i]]
            assert top == (nz[-1] if nz else -1), (w, k)
