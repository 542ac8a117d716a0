// Bessel and Airy functions of torch.special: bessel_j0/j1/y0/y1,
// modified_bessel_i0/i1/k0/k1, scaled_modified_bessel_k0/k1,
// spherical_bessel_j0 and airy_ai; p-norm distances (_cdist_forward,
// _pdist_forward). Each is a piecewise rational or Chebyshev
// approximation (the Cephes coefficients PyTorch's CPU kernels in
// aten/src/ATen/native/Math.h use), with the pieces picked by select on the
// argument's range. Floats compute in the opmath dtype (f32 for f16/bf16/f32,
// f64 for f64), as PyTorch does, and round once into the out dtype.
#include <stdlib.h>

#include "compiler/lower/lower_internal.h"

#define G (ctx->graph)
#define OUT (&ctx->out_types[0])

static tpr_status_t need_real_float(lw_ctx_t* ctx, tpr_dtype_t cd) {
  if (tpr_dtype_is_complex(cd))
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "complex dtypes are not supported");
  if (!tpr_dtype_is_float(cd))
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "needs a floating out type");
  return TPR_OK;
}

// Clenshaw sum of the Chebyshev series |c| at y (Cephes chbevl).
static tpr_value_t cheb(tpr_graph_t* g, tpr_value_t y, const double* c, int n) {
  tpr_value_t b0 = lw_k(g, y, c[0]), b1 = lw_k(g, y, 0), b2 = b1;
  for (int i = 1; i < n; i++) {
    b2 = b1;
    b1 = b0;
    b0 = lw_add(g, lw_sub(g, lw_mul(g, y, b1), b2), lw_k(g, y, c[i]));
  }
  return lw_mul(g, lw_sub(g, b0, b2), lw_k(g, y, 0.5));
}

#define KN(a) ((int)(sizeof(a) / sizeof((a)[0])))
#define ABS(x) lw_un(g, TPR_UNARY_ABS, x)
#define SQRT(x) lw_un(g, TPR_UNARY_SQRT, x)
#define LOG(x) lw_un(g, TPR_UNARY_LOG, x)
#define EXP(x) lw_un(g, TPR_UNARY_EXP, x)
#define SIN(x) lw_un(g, TPR_UNARY_SIN, x)
#define COS(x) lw_un(g, TPR_UNARY_COS, x)
#define NEG(x) lw_un(g, TPR_UNARY_NEG, x)
#define K(v) lw_k(g, x, v)

static const double kSqrt2OverPi = 0.797884560802865355879892119868763737;
static const double kTwoOverPi = 0.636619772367581343075535053490057448;

//===--- J0, J1, Y0, Y1 ----------------------------------------------------===//

static const double kJ0PP[] = {
    7.96936729297347051624e-04, 8.28352392107440799803e-02, 1.23953371646414299388e+00,
    5.44725003058768775090e+00, 8.74716500199817011941e+00, 5.30324038235394892183e+00,
    9.99999999999999997821e-01};
static const double kJ0PQ[] = {
    9.24408810558863637013e-04, 8.56288474354474431428e-02, 1.25352743901058953537e+00,
    5.47097740330417105182e+00, 8.76190883237069594232e+00, 5.30605288235394617618e+00,
    1.00000000000000000218e+00};
static const double kJ0QP[] = {
    -1.13663838898469149931e-02, -1.28252718670509318512e+00, -1.95539544257735972385e+01,
    -9.32060152123768231369e+01, -1.77681167980488050595e+02, -1.47077505154951170175e+02,
    -5.14105326766599330220e+01, -6.05014350600728481186e+00};
static const double kJ0QQ[] = {
    6.43178256118178023184e+01, 8.56430025976980587198e+02, 3.88240183605401609683e+03,
    7.24046774195652478189e+03, 5.93072701187316984827e+03, 2.06209331660327847417e+03,
    2.42005740240291393179e+02};
static const double kJ0RP[] = {
    -4.79443220978201773821e+09, 1.95617491946556577543e+12, -2.49248344360967716204e+14,
    9.70862251047306323952e+15};
static const double kJ0RQ[] = {
    4.99563147152651017219e+02, 1.73785401676374683123e+05, 4.84409658339962045305e+07,
    1.11855537045356834862e+10, 2.11277520115489217587e+12, 3.10518229857422583814e+14,
    3.18121955943204943306e+16, 1.71086294081043136091e+18};
static const double kY0YP[] = {
    1.55924367855235737965e+04, -1.46639295903971606143e+07, 5.43526477051876500413e+09,
    -9.82136065717911466409e+11, 8.75906394395366999549e+13, -3.46628303384729719441e+15,
    4.42733268572569800351e+16, -1.84950800436986690637e+16};
static const double kY0YQ[] = {
    1.04128353664259848412e+03, 6.26107330137134956842e+05, 2.68919633393814121987e+08,
    8.64002487103935000337e+10, 2.02979612750105546709e+13, 3.17157752842975028269e+15,
    2.50596256172653059228e+17};

static const double kJ1PP[] = {
    7.62125616208173112003e-04, 7.31397056940917570436e-02, 1.12719608129684925192e+00,
    5.11207951146807644818e+00, 8.42404590141772420927e+00, 5.21451598682361504063e+00,
    1.00000000000000000254e+00};
static const double kJ1PQ[] = {
    5.71323128072548699714e-04, 6.88455908754495404082e-02, 1.10514232634061696926e+00,
    5.07386386128601488557e+00, 8.39985554327604159757e+00, 5.20982848682361821619e+00,
    9.99999999999999997461e-01};
static const double kJ1QP[] = {
    5.10862594750176621635e-02, 4.98213872951233449420e+00, 7.58238284132545283818e+01,
    3.66779609360150777800e+02, 7.10856304998926107277e+02, 5.97489612400613639965e+02,
    2.11688757100572135698e+02, 2.52070205858023719784e+01};
static const double kJ1QQ[] = {
    7.42373277035675149943e+01, 1.05644886038262816351e+03, 4.98641058337653607651e+03,
    9.56231892404756170795e+03, 7.99704160447350683650e+03, 2.82619278517639096600e+03,
    3.36093607810698293419e+02};
static const double kJ1RP[] = {
    -8.99971225705559398224e+08, 4.52228297998194034323e+11, -7.27494245221818276015e+13,
    3.68295732863852883286e+15};
static const double kJ1RQ[] = {
    6.20836478118054335476e+02, 2.56987256757748830383e+05, 8.35146791431949253037e+07,
    2.21511595479792499675e+10, 4.74914122079991414898e+12, 7.84369607876235854894e+14,
    8.95222336184627338078e+16, 5.32278620332680085395e+18};
static const double kY1YP[] = {
    1.26320474790178026440e+09, -6.47355876379160291031e+11, 1.14509511541823727583e+14,
    -8.12770255501325109621e+15, 2.02439475713594898196e+17, -7.78877196265950026825e+17};
static const double kY1YQ[] = {
    5.94301592346128195359e+02, 2.35564092943068577943e+05, 7.34811944459721705660e+07,
    1.87601316108706159478e+10, 3.88231277496238566008e+12, 6.20557727146953693363e+14,
    6.87141087355300489866e+16, 3.97270608116560655612e+18};

// The asymptotic form for |x| > 5: (P cos(t) - 5/x Q sin(t)) sqrt(2/pi)/sqrt(x)
// for J, (P sin(t) + 5/x Q cos(t)) ... for Y, t = x - phase; w = 25/x^2.
static tpr_value_t bessel_asym(tpr_graph_t* g, tpr_value_t x, tpr_value_t w, int order,
                               bool y) {
  const double *pp = order ? kJ1PP : kJ0PP, *pq = order ? kJ1PQ : kJ0PQ;
  const double *qp = order ? kJ1QP : kJ0QP, *qq = order ? kJ1QQ : kJ0QQ;
  double phase = order ? 2.356194490192344928846982537459627163
                       : 0.785398163397448309615660845819875721;
  tpr_value_t p = lw_div(g, lw_polevl(g, w, pp, 7), lw_polevl(g, w, pq, 7));
  tpr_value_t q = lw_div(g, lw_polevl(g, w, qp, 8), lw_polevl(g, w, qq, 7));
  tpr_value_t t = lw_sub(g, x, K(phase));
  tpr_value_t fq = lw_mul(g, lw_div(g, K(5), x), q);
  tpr_value_t r = y ? lw_add(g, lw_mul(g, p, SIN(t)), lw_mul(g, fq, COS(t)))
                    : lw_sub(g, lw_mul(g, p, COS(t)), lw_mul(g, fq, SIN(t)));
  return lw_div(g, lw_mul(g, r, K(kSqrt2OverPi)), SQRT(x));
}

static tpr_value_t j0_of(tpr_graph_t* g, tpr_value_t x) {
  x = ABS(x);
  tpr_value_t z = lw_mul(g, x, x);
  tpr_value_t tiny = lw_sub(g, K(1), lw_div(g, z, K(4)));
  tpr_value_t mid = lw_div(g, lw_mul(g, lw_mul(g, lw_sub(g, z, K(5.78318596294678452118e+00)),
                                               lw_sub(g, z, K(3.04712623436620863991e+01))),
                                     lw_polevl(g, z, kJ0RP, 4)),
                           lw_polevl(g, z, kJ0RQ, 8));
  tpr_value_t lo = lw_sel(g, lw_cmpk(g, TPR_CMP_LT, x, 1e-5), tiny, mid);
  tpr_value_t hi = bessel_asym(g, x, lw_div(g, K(25), z), 0, false);
  return lw_sel(g, lw_cmpk(g, TPR_CMP_LE, x, 5), lo, hi);
}

static tpr_value_t j1_of(tpr_graph_t* g, tpr_value_t x) {
  tpr_value_t ax = ABS(x);
  tpr_value_t z = lw_mul(g, ax, ax);
  tpr_value_t lo = lw_mul(g, lw_mul(g, lw_mul(g, lw_div(g, lw_polevl(g, z, kJ1RP, 4),
                                                        lw_polevl(g, z, kJ1RQ, 8)),
                                              ax),
                                    lw_sub(g, z, K(1.46819706421238932572e+01))),
                          lw_sub(g, z, K(4.92184563216946036703e+01)));
  tpr_value_t f = lw_div(g, K(5), ax);
  tpr_value_t hi = bessel_asym(g, ax, lw_mul(g, f, f), 1, false);
  tpr_value_t r = lw_sel(g, lw_cmpk(g, TPR_CMP_LE, ax, 5), lo, hi);
  return lw_sel(g, lw_cmpk(g, TPR_CMP_LT, x, 0), NEG(r), r);
}

static tpr_value_t y0_of(tpr_graph_t* g, tpr_value_t x) {
  tpr_value_t z = lw_mul(g, x, x);
  tpr_value_t lo = lw_add(g, lw_div(g, lw_polevl(g, z, kY0YP, 8), lw_polevl(g, z, kY0YQ, 7)),
                          lw_mul(g, lw_mul(g, K(kTwoOverPi), LOG(x)), j0_of(g, x)));
  lo = lw_sel(g, lw_cmpk(g, TPR_CMP_LT, x, 0), K(NAN), lo);
  lo = lw_sel(g, lw_cmpk(g, TPR_CMP_EQ, x, 0), K(-INFINITY), lo);
  tpr_value_t hi = bessel_asym(g, x, lw_div(g, K(25), z), 0, true);
  return lw_sel(g, lw_cmpk(g, TPR_CMP_LE, x, 5), lo, hi);
}

static tpr_value_t y1_of(tpr_graph_t* g, tpr_value_t x) {
  tpr_value_t z = lw_mul(g, x, x);
  tpr_value_t lo = lw_add(
      g, lw_mul(g, x, lw_div(g, lw_polevl(g, z, kY1YP, 6), lw_polevl(g, z, kY1YQ, 8))),
      lw_mul(g, K(kTwoOverPi),
             lw_sub(g, lw_mul(g, j1_of(g, x), LOG(x)), lw_div(g, K(1), x))));
  lo = lw_sel(g, lw_cmpk(g, TPR_CMP_LT, x, 0), K(NAN), lo);
  lo = lw_sel(g, lw_cmpk(g, TPR_CMP_EQ, x, 0), K(-INFINITY), lo);
  tpr_value_t f = lw_div(g, K(5), x);
  tpr_value_t hi = bessel_asym(g, x, lw_mul(g, f, f), 1, true);
  return lw_sel(g, lw_cmpk(g, TPR_CMP_LE, x, 5), lo, hi);
}

//===--- I0, I1, K0, K1 ----------------------------------------------------===//

static const double kI0A[] = {
    -4.41534164647933937950e-18, 3.33079451882223809783e-17, -2.43127984654795469359e-16,
    1.71539128555513303061e-15,  -1.16853328779934516808e-14, 7.67618549860493561688e-14,
    -4.85644678311192946090e-13, 2.95505266312963983461e-12, -1.72682629144155570723e-11,
    9.67580903537323691224e-11,  -5.18979560163526290666e-10, 2.65982372468238665035e-09,
    -1.30002500998624804212e-08, 6.04699502254191894932e-08, -2.67079385394061173391e-07,
    1.11738753912010371815e-06,  -4.41673835845875056359e-06, 1.64484480707288970893e-05,
    -5.75419501008210370398e-05, 1.88502885095841655729e-04, -5.76375574538582365885e-04,
    1.63947561694133579842e-03,  -4.32430999505057594430e-03, 1.05464603945949983183e-02,
    -2.37374148058994688156e-02, 4.93052842396707084878e-02, -9.49010970480476444210e-02,
    1.71620901522208775349e-01,  -3.04682672343198398683e-01, 6.76795274409476084995e-01};
static const double kI0B[] = {
    -7.23318048787475395456e-18, -4.83050448594418207126e-18, 4.46562142029675999901e-17,
    3.46122286769746109310e-17,  -2.82762398051658348494e-16, -3.42548561967721913462e-16,
    1.77256013305652638360e-15,  3.81168066935262242075e-15,  -9.55484669882830764870e-15,
    -4.15056934728722208663e-14, 1.54008621752140982691e-14,  3.85277838274214270114e-13,
    7.18012445138366623367e-13,  -1.79417853150680611778e-12, -1.32158118404477131188e-11,
    -3.14991652796324136454e-11, 1.18891471078464383424e-11,  4.94060238822496958910e-10,
    3.39623202570838634515e-09,  2.26666899049817806459e-08,  2.04891858946906374183e-07,
    2.89137052083475648297e-06,  6.88975834691682398426e-05,  3.36911647825569408990e-03,
    8.04490411014108831608e-01};
static const double kI1A[] = {
    2.77791411276104639959e-18,  -2.11142121435816608115e-17, 1.55363195773620046921e-16,
    -1.10559694773538630805e-15, 7.60068429473540693410e-15,  -5.04218550472791168711e-14,
    3.22379336594557470981e-13,  -1.98397439776494371520e-12, 1.17361862988909016308e-11,
    -6.66348972350202774223e-11, 3.62559028155211703701e-10,  -1.88724975172282928790e-09,
    9.38153738649577178388e-09,  -4.44505912879632808065e-08, 2.00329475355213526229e-07,
    -8.56872026469545474066e-07, 3.47025130813767847674e-06,  -1.32731636560394358279e-05,
    4.78156510755005422638e-05,  -1.61760815825896745588e-04, 5.12285956168575772895e-04,
    -1.51357245063125314899e-03, 4.15642294431288815669e-03,  -1.05640848946261981558e-02,
    2.47264490306265168283e-02,  -5.29459812080949914269e-02, 1.02643658689847095384e-01,
    -1.76416518357834055153e-01, 2.52587186443633654823e-01};
static const double kI1B[] = {
    7.51729631084210481353e-18,  4.41434832307170791151e-18,  -4.65030536848935832153e-17,
    -3.20952592199342395980e-17, 2.96262899764595013876e-16,  3.30820231092092828324e-16,
    -1.88035477551078244854e-15, -3.81440307243700780478e-15, 1.04202769841288027642e-14,
    4.27244001671195135429e-14,  -2.10154184277266431302e-14, -4.08355111109219731823e-13,
    -7.19855177624590851209e-13, 2.03562854414708950722e-12,  1.41258074366137813316e-11,
    3.25260358301548823856e-11,  -1.89749581235054123450e-11, -5.58974346219658380687e-10,
    -3.83538038596423702205e-09, -2.63146884688951950684e-08, -2.51223623787020892529e-07,
    -3.88256480887769039346e-06, -1.10588938762623716291e-04, -9.76109749136146840777e-03,
    7.78576235018280120474e-01};
static const double kK0A[] = {
    1.37446543561352307156e-16, 4.25981614279661018399e-14, 1.03496952576338420167e-11,
    1.90451637722020886025e-09, 2.53479107902614945675e-07, 2.28621210311945178607e-05,
    1.26461541144692592338e-03, 3.59799365153615016266e-02, 3.44289899924628486886e-01,
    -5.35327393233902768720e-01};
static const double kK0B[] = {
    5.30043377268626276149e-18,  -1.64758043015242134646e-17, 5.21039150503902756861e-17,
    -1.67823109680541210385e-16, 5.51205597852431940784e-16,  -1.84859337734377901440e-15,
    6.34007647740507060557e-15,  -2.22751332699166985548e-14, 8.03289077536357521100e-14,
    -2.98009692317273043925e-13, 1.14034058820847496303e-12,  -4.51459788337394416547e-12,
    1.85594911495471785253e-11,  -7.95748924447710747776e-11, 3.57739728140030116597e-10,
    -1.69753450938905987466e-09, 8.57403401741422608519e-09,  -4.66048989768794782956e-08,
    2.76681363944501510342e-07,  -1.83175552271911948767e-06, 1.39498137188764993662e-05,
    -1.28495495816278026384e-04, 1.56988388573005337491e-03,  -3.14481013119645005427e-02,
    2.44030308206595545468e+00};
static const double kK1A[] = {
    -7.02386347938628759343e-18, -2.42744985051936593393e-15, -6.66690169419932900609e-13,
    -1.41148839263352776110e-10, -2.21338763073472585583e-08, -2.43340614156596823496e-06,
    -1.73028895751305206302e-04, -6.97572385963986435018e-03, -1.22611180822657148235e-01,
    -3.53155960776544875667e-01, 1.52530022733894777053e+00};
static const double kK1B[] = {
    -5.75674448366501715755e-18, 1.79405087314755922667e-17,  -5.68946255844285935196e-17,
    1.83809354436663880070e-16,  -6.05704724837331885336e-16, 2.03870316562433424052e-15,
    -7.01983709041831346144e-15, 2.47715442448130437068e-14,  -8.97670518232499435011e-14,
    3.34841966607842919884e-13,  -1.28917396095102890680e-12, 5.13963967348173025100e-12,
    -2.12996783842756842877e-11, 9.21831518760500529508e-11,  -4.19035475934189648750e-10,
    2.01504975519703286596e-09,  -1.03457624656780970260e-08, 5.74108412545004946722e-08,
    -3.50196060308781257119e-07, 2.40648494783721712015e-06,  -1.93619797416608296024e-05,
    1.95215518471351631108e-04,  -2.85781685962277938680e-03, 1.03923736576817238437e-01,
    2.72062619048444266945e+00};

// I0 (order 0) or I1 (order 1).
static tpr_value_t i_of(tpr_graph_t* g, tpr_value_t x, int order) {
  tpr_value_t ax = ABS(x), ex = EXP(ax);
  tpr_value_t a = cheb(g, lw_sub(g, lw_div(g, ax, K(2)), K(2)), order ? kI1A : kI0A,
                       order ? KN(kI1A) : KN(kI0A));
  tpr_value_t b = cheb(g, lw_sub(g, lw_div(g, K(32), ax), K(2)), order ? kI1B : kI0B,
                       KN(kI0B));
  tpr_value_t lo = order ? lw_mul(g, lw_mul(g, a, ax), ex) : lw_mul(g, ex, a);
  tpr_value_t hi = lw_div(g, lw_mul(g, ex, b), SQRT(ax));
  tpr_value_t r = lw_sel(g, lw_cmpk(g, TPR_CMP_LE, ax, 8), lo, hi);
  if (order) r = lw_sel(g, lw_cmpk(g, TPR_CMP_LT, x, 0), NEG(r), r);
  return r;
}

// K0/K1, times exp(x) when |scaled|.
static tpr_value_t k_of(tpr_graph_t* g, tpr_value_t x, int order, bool scaled) {
  tpr_value_t a = cheb(g, lw_sub(g, lw_mul(g, x, x), K(2)), order ? kK1A : kK0A,
                       order ? KN(kK1A) : KN(kK0A));
  tpr_value_t lg = LOG(lw_mul(g, K(0.5), x));
  tpr_value_t lo = order ? lw_add(g, lw_mul(g, lg, i_of(g, x, 1)), lw_div(g, a, x))
                         : lw_sub(g, a, lw_mul(g, lg, i_of(g, x, 0)));
  tpr_value_t b = lw_div(g, cheb(g, lw_sub(g, lw_div(g, K(8), x), K(2)),
                                 order ? kK1B : kK0B, KN(kK0B)),
                         SQRT(x));
  if (scaled) lo = lw_mul(g, lo, EXP(x));
  else b = lw_mul(g, EXP(NEG(x)), b);
  tpr_value_t r = lw_sel(g, lw_cmpk(g, TPR_CMP_LE, x, 2), lo, b);
  r = lw_sel(g, lw_cmpk(g, TPR_CMP_LT, x, 0), K(NAN), r);
  return lw_sel(g, lw_cmpk(g, TPR_CMP_EQ, x, 0), K(INFINITY), r);
}

//===--- spherical J0, Airy Ai ---------------------------------------------===//

static tpr_value_t sph_j0_of(tpr_graph_t* g, tpr_value_t x) {
  static const double c[] = {1.0 / 6227020800.0, -1.0 / 39916800.0, 1.0 / 362880.0,
                             -1.0 / 5040.0,      1.0 / 120.0,        -1.0 / 6.0, 1.0};
  tpr_value_t ax = ABS(x);
  tpr_value_t series = lw_polevl(g, lw_mul(g, x, x), c, KN(c));
  tpr_value_t r = lw_sel(g, lw_cmpk(g, TPR_CMP_LT, ax, 0.5), series,
                         lw_div(g, SIN(x), x));
  return lw_sel(g, lw_cmpk(g, TPR_CMP_EQ, ax, INFINITY), K(0), r);
}

static const double kAiAN[] = {
    3.46538101525629032477e-01, 1.20075952739645805542e+01, 7.62796053615234516538e+01,
    1.68089224934630576269e+02, 1.59756391350164413639e+02, 7.05360906840444183113e+01,
    1.40264691163389668864e+01, 9.99999999999999995305e-01};
static const double kAiAD[] = {
    5.67594532638770212846e-01, 1.47562562584847203173e+01, 8.45138970141474626562e+01,
    1.77318088145400459522e+02, 1.64234692871529701831e+02, 7.14778400825575695274e+01,
    1.40959135607834029598e+01, 1.00000000000000000470e+00};
static const double kAiAFN[] = {
    -1.31696323418331795333e-01, -6.26456544431912369773e-01, -6.93158036036933542233e-01,
    -2.79779981545119124951e-01, -4.91900132609500318020e-02, -4.06265923594885404393e-03,
    -1.59276496239262096340e-04, -2.77649108155232920844e-06, -1.67787698489114633780e-08};
static const double kAiAFD[] = {
    1.33560420706553243746e+01, 3.26825032795224613948e+01, 2.67367040941499554804e+01,
    9.18707402907259625840e+00, 1.47529146771666414581e+00, 1.15687173795188044134e-01,
    4.40291641615211203805e-03, 7.54720348287414296618e-05, 4.51850092970580378464e-07};
static const double kAiAGN[] = {
    1.97339932091685679179e-02, 3.91103029615688277255e-01, 1.06579897599595591108e+00,
    9.39169229816650230044e-01, 3.51465656105547619242e-01, 6.33888919628925490927e-02,
    5.85804113048388458567e-03, 2.82851600836737019778e-04, 6.98793669997260967291e-06,
    8.11789239554389293311e-08, 3.41551784765923618484e-10};
static const double kAiAGD[] = {
    9.30892908077441974853e+00, 1.98352928718312140417e+01, 1.55646628932864612953e+01,
    5.47686069422975497931e+00, 9.54293611618961883998e-01, 8.64580826352392193095e-02,
    4.12656523824222607191e-03, 1.01259085116509135510e-04, 1.17166733214413521882e-06,
    4.91834570062930015649e-09};

static tpr_value_t airy_ai_of(tpr_graph_t* g, tpr_value_t x) {
  const double inv_sqrt_pi = 5.64189583547756286948e-01;
  // x < -2.09: oscillating asymptotic form.
  tpr_value_t nx = NEG(x), snx = SQRT(nx);
  // Divided, not multiplied by 1/3 (lw_div_exact): an ulp of the phase moved
  // Ai(-501) by 6e-5 on lammps-jax-pjrt-cpu 0.11.2.
  tpr_value_t zeta_n = lw_div_exact(g, lw_mul(g, lw_mul(g, K(2), nx), snx), 3);
  tpr_value_t z = lw_div(g, K(1), zeta_n), zz = lw_mul(g, z, z);
  tpr_value_t f = lw_div(g, lw_polevl(g, zz, kAiAFN, KN(kAiAFN)), lw_polevl(g, zz, kAiAFD, KN(kAiAFD)));
  tpr_value_t gg = lw_div(g, lw_polevl(g, zz, kAiAGN, KN(kAiAGN)), lw_polevl(g, zz, kAiAGD, KN(kAiAGD)));
  tpr_value_t t = lw_add(g, zeta_n, K(0.25 * 3.14159265358979323846));
  tpr_value_t neg = lw_mul(g, lw_div(g, K(inv_sqrt_pi), SQRT(snx)),
                           lw_sub(g, lw_mul(g, SIN(t), lw_add(g, K(1), lw_mul(g, zz, f))),
                                  lw_mul(g, COS(t), lw_mul(g, z, gg))));
  // x >= 2.09: decaying asymptotic form.
  tpr_value_t sx = SQRT(x);
  tpr_value_t zeta = lw_div_exact(g, lw_mul(g, lw_mul(g, K(2), x), sx), 3);
  tpr_value_t iz = lw_div(g, K(1), zeta);
  tpr_value_t pos = lw_div(g, lw_mul(g, K(inv_sqrt_pi),
                                     lw_div(g, lw_polevl(g, iz, kAiAN, KN(kAiAN)),
                                            lw_polevl(g, iz, kAiAD, KN(kAiAD)))),
                           lw_mul(g, lw_mul(g, K(2), SQRT(sx)), EXP(zeta)));
  // Otherwise the Maclaurin series Ai = c1 f - c2 g (converged well before
  // the last term for |x| < 2.09).
  tpr_value_t x3 = lw_mul(g, lw_mul(g, x, x), x);
  tpr_value_t sf = K(1), sg = x, m = K(1), n = x;
  double k = 1;
  for (int i = 0; i < 16; i++) {
    m = lw_div(g, lw_mul(g, m, x3), K((k + 1) * (k + 2)));
    n = lw_div(g, lw_mul(g, n, x3), K((k + 2) * (k + 3)));
    k += 3;
    sf = lw_add(g, sf, m);
    sg = lw_add(g, sg, n);
  }
  tpr_value_t mid = lw_sub(g, lw_mul(g, K(0.355028053887817239260), sf),
                           lw_mul(g, K(0.258819403792806798405), sg));
  tpr_value_t r = lw_sel(g, lw_cmpk(g, TPR_CMP_LT, x, -2.09), neg,
                         lw_sel(g, lw_cmpk(g, TPR_CMP_GE, x, 2.09), pos, mid));
  r = lw_sel(g, lw_cmpk(g, TPR_CMP_GT, x, 103.892), K(0), r);
  return lw_sel(g, lw_cmpk(g, TPR_CMP_EQ, ABS(x), INFINITY), K(NAN), r);
}


//===--- cdist, pdist ------------------------------------------------------===//

// p-norm over the last dim of |d| = |a - b| (rank r + 1 -> r).
static tpr_value_t pnorm_last(tpr_graph_t* g, tpr_value_t a, tpr_value_t b, int rank,
                              double p) {
  tpr_value_t d = lw_un(g, TPR_UNARY_ABS, lw_sub(g, a, b));
  int64_t last = rank;
  if (p == 0)
    return tpr_reduce(g, lw_sel(g, lw_cmpk(g, TPR_CMP_NE, d, 0), lw_k(g, d, 1), lw_k(g, d, 0)),
                      TPR_REDUCE_SUM, &last, 1);
  if (isinf(p)) return tpr_reduce(g, d, TPR_REDUCE_MAX, &last, 1);
  if (p == 1) return tpr_reduce(g, d, TPR_REDUCE_SUM, &last, 1);
  if (p == 2)
    return lw_un(g, TPR_UNARY_SQRT, tpr_reduce(g, lw_mul(g, d, d), TPR_REDUCE_SUM, &last, 1));
  tpr_value_t s = tpr_reduce(g, tpr_binary(g, TPR_BINARY_POW, d, lw_k(g, d, p)),
                             TPR_REDUCE_SUM, &last, 1);
  return tpr_binary(g, TPR_BINARY_POW, s, lw_k(g, s, 1.0 / p));
}

//===--- rules -------------------------------------------------------------===//

enum {
  F_J0, F_J1, F_Y0, F_Y1, F_I0, F_I1, F_K0, F_K1, F_K0E, F_K1E, F_SJ0, F_AI
};

static tpr_status_t special_fn(lw_ctx_t* ctx, int which) {
  tpr_dtype_t cd = lw_opmath(OUT->dtype);
  TPR_RETURN_IF_ERROR(need_real_float(ctx, cd));
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  if (!t) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "self must be a tensor");
  if (tpr_dtype_is_complex(t->dtype))
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "complex dtypes are not supported");
  tpr_graph_t* g = G;
  tpr_value_t x = lw_in(ctx, 0, cd, OUT), r;
  switch (which) {
    case F_J0: r = j0_of(g, x); break;
    case F_J1: r = j1_of(g, x); break;
    case F_Y0: r = y0_of(g, x); break;
    case F_Y1: r = y1_of(g, x); break;
    case F_I0: r = i_of(g, x, 0); break;
    case F_I1: r = i_of(g, x, 1); break;
    case F_K0: r = k_of(g, x, 0, false); break;
    case F_K1: r = k_of(g, x, 1, false); break;
    case F_K0E: r = k_of(g, x, 0, true); break;
    case F_K1E: r = k_of(g, x, 1, true); break;
    case F_SJ0: r = sph_j0_of(g, x); break;
    default: r = airy_ai_of(g, x); break;
  }
  return lw_ret(ctx, r);
}

#define DEF(name, id) \
  static tpr_status_t lower_##name(lw_ctx_t* ctx) { return special_fn(ctx, id); }
DEF(j0, F_J0)
DEF(j1, F_J1)
DEF(y0, F_Y0)
DEF(y1, F_Y1)
DEF(mi0, F_I0)
DEF(mi1, F_I1)
DEF(mk0, F_K0)
DEF(mk1, F_K1)
DEF(smk0, F_K0E)
DEF(smk1, F_K1E)
DEF(sj0, F_SJ0)
DEF(ai, F_AI)


// _cdist_forward(x1 [*, P, M], x2 [*, R, M], p, compute_mode) -> [*, P, R].
static tpr_status_t lower_cdist(lw_ctx_t* ctx) {
  const tpr_type_t *t1 = lw_arg_type(ctx, 0), *t2 = lw_arg_type(ctx, 1);
  if (!t1 || !t2) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "x1 and x2 must be tensors");
  tpr_dtype_t cd = lw_opmath(OUT->dtype);
  TPR_RETURN_IF_ERROR(need_real_float(ctx, cd));
  if (t1->rank < 2 || t2->rank < 2 || t1->dims[t1->rank - 1] != t2->dims[t2->rank - 1])
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "x1 and x2 need rank >= 2 and equal last dims");
  double p = lw_double(ctx, 2, 2.0);
  if (!(p >= 0)) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "p must be non-negative");
  int r = OUT->rank;
  if (r < 2 || r + 1 > TPR_MAX_RANK || OUT->dims[r - 2] != t1->dims[t1->rank - 2] ||
      OUT->dims[r - 1] != t2->dims[t2->rank - 2])
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "unexpected out shape");
  int64_t m = t1->dims[t1->rank - 1];
  if (m == 0 || tpr_type_numel(OUT) == 0) return lw_ret(ctx, lw_full(G, 0, cd, OUT));
  int nb = r - 2;
  int64_t d1[TPR_MAX_RANK], d2[TPR_MAX_RANK], full[TPR_MAX_RANK];
  int64_t map1[TPR_MAX_RANK], map2[TPR_MAX_RANK];
  for (int i = 0; i < nb; i++) d1[i] = d2[i] = full[i] = OUT->dims[i], map1[i] = map2[i] = i;
  d1[nb] = OUT->dims[nb], d1[nb + 1] = m;
  d2[nb] = OUT->dims[nb + 1], d2[nb + 1] = m;
  full[nb] = OUT->dims[nb], full[nb + 1] = OUT->dims[nb + 1], full[nb + 2] = m;
  map1[nb] = nb, map1[nb + 1] = nb + 2;
  map2[nb] = nb + 1, map2[nb + 1] = nb + 2;
  tpr_value_t a = tpr_broadcast_to(G, lw_cast(G, lw_value(ctx, 0), cd), r, d1);
  tpr_value_t b = tpr_broadcast_to(G, lw_cast(G, lw_value(ctx, 1), cd), r, d2);
  a = tpr_broadcast_in_dim(G, a, r + 1, full, map1);
  b = tpr_broadcast_in_dim(G, b, r + 1, full, map2);
  return lw_ret(ctx, pnorm_last(G, a, b, r, p));
}

// _pdist_forward(self [N, M], p) -> [N (N - 1) / 2], rows i < j in order.
static tpr_status_t lower_pdist(lw_ctx_t* ctx) {
  const tpr_type_t* t = lw_arg_type(ctx, 0);
  if (!t || t->rank != 2) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "self must be a matrix");
  tpr_dtype_t cd = lw_opmath(OUT->dtype);
  TPR_RETURN_IF_ERROR(need_real_float(ctx, cd));
  double p = lw_double(ctx, 1, 2.0);
  if (!(p >= 0)) return lw_fail(ctx, TPR_INVALID_ARGUMENT, "p must be non-negative");
  int64_t n = t->dims[0], m = t->dims[1];
  int64_t k = n > 1 ? n * (n - 1) / 2 : 0;
  if (OUT->rank != 1 || OUT->dims[0] != k)
    return lw_fail(ctx, TPR_INVALID_ARGUMENT, "unexpected out shape");
  if (k == 0 || m == 0) return lw_ret(ctx, lw_full(G, 0, cd, OUT));
  if (k > ((int64_t)1 << 24))
    return lw_fail(ctx, TPR_UNIMPLEMENTED, "too many rows (%lld)", (long long)n);
  int64_t* idx = malloc(sizeof(int64_t) * 2 * (size_t)k);
  if (!idx) return lw_fail(ctx, TPR_RESOURCE_EXHAUSTED, "out of memory");
  int64_t c = 0;
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = i + 1; j < n; j++) idx[c] = i, idx[k + c] = j, c++;
  tpr_type_t it = tpr_type_make(TPR_DTYPE_S64, 1, &k);
  tpr_value_t ii = tpr_constant_dense(G, it, idx);
  tpr_value_t jj = tpr_constant_dense(G, it, idx + k);
  free(idx);
  tpr_value_t x = lw_cast(G, lw_value(ctx, 0), cd);
  tpr_value_t a = tpr_index_select(G, x, 0, ii), b = tpr_index_select(G, x, 0, jj);
  return lw_ret(ctx, pnorm_last(G, a, b, 1, p));
}

//===--- table -------------------------------------------------------------===//

#define FO(n, fn) LW_RULE(n, fn), LW_RULE(n ".out", fn)

LW_DEFINE_TABLE(bessel_cdist,
    FO("special_bessel_j0", lower_j0), FO("special_bessel_j1", lower_j1),
    FO("special_bessel_y0", lower_y0), FO("special_bessel_y1", lower_y1),
    FO("special_modified_bessel_i0", lower_mi0),
    FO("special_modified_bessel_i1", lower_mi1),
    FO("special_modified_bessel_k0", lower_mk0),
    FO("special_modified_bessel_k1", lower_mk1),
    FO("special_scaled_modified_bessel_k0", lower_smk0),
    FO("special_scaled_modified_bessel_k1", lower_smk1),
    FO("special_spherical_bessel_j0", lower_sj0),
    FO("special_airy_ai", lower_ai),
    FO("_cdist_forward", lower_cdist), FO("_pdist_forward", lower_pdist));
